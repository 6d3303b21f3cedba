"""Tabular and structured files as text a retriever finds: CSV rows (the csv module, streamed) and a workbook's rows
(office.py) as records of their header, JSON (the json module) as one `path: value` line per value.

A row is written `header: value; header: value` rather than as tab-separated values: a chunk cut from the middle of
a table no longer holds its header row, and a question names what it asks about ("the amount for North"), which a
bare number beside other numbers does not carry into its embedding. Records are grouped into texts of at most a
chunk's size, never cutting one, so that each chunk's metadata says exactly which rows (or which JSON path) it
holds; a single record longer than a chunk is left to the splitter.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from langchain_core.documents import Document

K = TypeVar("K")
# The delimiters a CSV file may use, the first where its header has none of them.
DELIMITERS = ",;\t|"
# The most characters one CSV row may span, quoted line breaks included: a row is held whole while it is read, and
# the csv module keeps a string per field (a line of a million empty fields is tens of MB).
MAX_ROW_CHARS = 1 << 20


class Unreadable(ValueError):
    """The file is not what its kind says, or breaks a bound of its reader; the message says how."""


def record_lines(rows: Iterable[tuple[int, list[str]]]) -> Iterator[tuple[int, str]]:
    """Each row after the header (the first row that has a value) as `header: value; ...`, empty values left out;
    a column without a header is named by its number. Rows without a value are skipped."""
    header: list[str] | None = None
    for number, cells in rows:
        values = [cell.strip() for cell in cells]
        if not any(values):
            continue
        if header is None:
            header = values
            continue
        named = [(header[i] if i < len(header) and header[i] else f"column {i + 1}", value)
                 for i, value in enumerate(values) if value]
        yield number, "; ".join(f"{name}: {value}" for name, value in named)


def grouped(lines: Iterable[tuple[K, str]], max_chars: int) -> Iterator[tuple[str, K, K]]:
    """Lines joined into texts of at most `max_chars` characters (a longer line alone), each with the keys of its
    first and last line."""
    group: list[tuple[K, str]] = []
    size = 0
    for key, line in lines:
        if group and size + 1 + len(line) > max_chars:
            yield "\n".join(text for _, text in group), group[0][0], group[-1][0]
            group, size = [], 0
        size += len(line) + (1 if group else 0)
        group.append((key, line))
    if group:
        yield "\n".join(text for _, text in group), group[0][0], group[-1][0]


def span(first: int, last: int) -> str:
    """Row numbers as metadata: `7`, or `7-19`."""
    return str(first) if first == last else f"{first}-{last}"


class _Lines:
    """A CSV file's lines for csv.reader, each row's held to MAX_ROW_CHARS in all (a quoted field may span lines):
    `row_chars` is reset as each row is taken."""

    def __init__(self, handle: IO[str]):
        self.handle = handle
        self.row_chars = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self.handle.readline(MAX_ROW_CHARS + 1)
        if not line:
            raise StopIteration
        self.row_chars += len(line)
        if self.row_chars > MAX_ROW_CHARS:
            raise Unreadable(f"a row is longer than {MAX_ROW_CHARS} characters")
        return line


def _delimiter(header: str) -> str:
    """The delimiter its header row uses most. (The csv module's Sniffer gives up on a quoted field that spans
    lines, and a header row seldom quotes a delimiter.)"""
    return max(DELIMITERS, key=lambda each: (header.count(each), -DELIMITERS.index(each)))


def csv_records(path: Path, max_chars: int) -> Iterator[Document]:
    """A CSV file's rows as records, in texts of at most `max_chars`, each with its rows (1 is the header)."""
    with path.open(encoding="utf-8-sig", newline="") as handle:  # strict UTF-8; a BOM (Excel writes one) dropped
        delimiter = _delimiter(handle.readline(MAX_ROW_CHARS))
        handle.seek(0)
        lines = _Lines(handle)

        def rows() -> Iterator[tuple[int, list[str]]]:
            for number, row in enumerate(csv.reader(lines, delimiter=delimiter), start=1):
                lines.row_chars = 0
                yield number, row

        for text, first, last in grouped(record_lines(rows()), max_chars):
            yield Document(text, metadata={"rows": span(first, last)})


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def flattened(value: Any) -> Iterator[tuple[str, str]]:
    """Every value of a JSON document with its path (`orders[2].total`), in document order; empty objects and
    arrays say nothing and are left out. Iterative: as deep as the parser went, never Python's recursion limit."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed([(f"{path}.{key}" if path else str(key), child) for key, child in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{index}]", child) for index, child in enumerate(item)]))
        else:
            yield path or "$", _scalar(item)


def json_values(path: Path, max_chars: int) -> Iterator[Document]:
    """A JSON file's values as `path: value` lines, in texts of at most `max_chars`, each with the path it starts
    at. The file is parsed whole (ingestion holds it to MAX_PARSED_BYTES first)."""
    with path.open(encoding="utf-8-sig") as handle:
        document = json.load(handle)
    lines = ((where, f"{where}: {text}") for where, text in flattened(document))
    for text, first, _ in grouped(lines, max_chars):
        yield Document(text, metadata={"path": first})
