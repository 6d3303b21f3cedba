"""Tables and structured files as text a retriever finds: rows as records of their header, grouped into texts of at
most a chunk's size that say which rows they hold; CSV streamed in its own dialect, each row bounded; JSON as one
`path: value` line per value, whatever its depth."""

from __future__ import annotations

import json

import pytest

from ovgenai_services.gateway.ingestion import records
from ovgenai_services.gateway.ingestion.readers import Unreadable, load_pages
from ovgenai_services.gateway.ingestion.records import csv_records, flattened, grouped, json_values, record_lines


def test_rows_become_records_of_the_header_row():
    rows = [(1, ["", ""]), (2, ["Region", "Amount", ""]), (3, ["North", " 1200 ", "extra"]), (4, ["", ""]),
            (5, ["South", ""])]
    assert list(record_lines(rows)) == [(3, "Region: North; Amount: 1200; column 3: extra"), (5, "Region: South")]


def test_lines_are_grouped_within_the_size_and_a_long_one_stands_alone():
    lines = [(1, "a" * 4), (2, "b" * 4), (3, "c" * 20), (4, "d" * 4)]
    assert list(grouped(lines, 10)) == [("aaaa\nbbbb", 1, 2), ("c" * 20, 3, 3), ("dddd", 4, 4)]
    assert list(grouped([], 10)) == []


def test_a_csv_is_read_in_its_dialect_and_each_text_says_its_rows(tmp_path):
    path = tmp_path / "sales.csv"
    rows = ["Region;Amount;Note"] + [f"Region {i};{i * 100};\"two\nlines\"" for i in range(1, 40)]
    path.write_bytes(("\ufeff" + "\r\n".join(rows) + "\r\n").encode())  # Excel's BOM and line ends
    texts = list(csv_records(path, 200))
    assert texts[0].page_content.startswith("Region: Region 1; Amount: 100; Note: two\nlines\nRegion: Region 2;")
    assert all(len(text.page_content) <= 200 for text in texts)
    assert texts[0].metadata == {"rows": "2-5"} and texts[-1].metadata["rows"].endswith("-40")
    numbered = [text.metadata["rows"] for text in texts]
    assert [int(span.split("-")[0]) for span in numbered[1:]] == [int(span.split("-")[1]) + 1 for span in numbered[:-1]]


def test_a_csv_row_past_its_bound_and_a_csv_not_in_utf8_are_unreadable(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "MAX_ROW_CHARS", 100)
    long = tmp_path / "long.csv"
    long.write_text('a,b\n1,"' + "x\n" * 80 + '"\n')  # one quoted field over many lines
    with pytest.raises(Unreadable, match="longer than 100 characters"):
        list(load_pages(long, "csv", 1000))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("city\ncafé\n".encode("latin-1"))
    with pytest.raises(Unreadable, match="UnicodeDecodeError"):
        list(load_pages(latin, "csv", 1000))


def test_json_is_flattened_to_paths_in_document_order():
    document = {"shop": {"name": "Kiosk", "open": True, "items": [{"sku": 7, "price": 2.5}, {"sku": 9}], "tags": []},
                "note": None}
    assert list(flattened(document)) == [
        ("shop.name", "Kiosk"), ("shop.open", "true"), ("shop.items[0].sku", "7"), ("shop.items[0].price", "2.5"),
        ("shop.items[1].sku", "9"), ("note", "null")]
    assert list(flattened("alone")) == [("$", "alone")]


def test_json_texts_say_the_path_they_start_at(tmp_path):
    path = tmp_path / "orders.json"
    path.write_text(json.dumps([{"id": i, "customer": f"Customer {i}"} for i in range(30)]))
    texts = list(json_values(path, 120))
    assert texts[0].page_content.startswith("[0].id: 0\n[0].customer: Customer 0\n[1].id: 1")
    assert texts[0].metadata == {"path": "[0].id"} and all(len(t.page_content) <= 120 for t in texts)
    assert texts[1].metadata["path"] == texts[1].page_content.split(":")[0]


def test_deep_json_is_flattened_without_recursion_and_json_past_the_parser_is_unreadable(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 900 + "1" + "]" * 900)
    assert [text.page_content for text in load_pages(deep, "json", 100_000)] == ["[0]" * 900 + ": 1"]
    for body in ("[" * 200_000 + "]" * 200_000, '{"a": '):
        deep.write_text(body)
        with pytest.raises(Unreadable):
            list(load_pages(deep, "json", 1000))
