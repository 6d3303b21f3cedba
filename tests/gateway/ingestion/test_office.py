"""Office files written here by the libraries that read them: a Word document's paragraphs and tables by the page
Word laid them on, a deck's slides (text boxes, tables, groups, notes) by number, a workbook's sheets as records
with their rows; and each measured before it is opened, so that a zip bomb or a file that is no archive is refused
unread."""

from __future__ import annotations

import datetime
import io
import zipfile
from pathlib import Path

import docx
import pytest
from docx.oxml import OxmlElement
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

from ovgenai_services.gateway.ingestion.office import (
    TooLarge,
    check_package,
    docx_pages,
    pptx_slides,
    xlsx_records,
)
from ovgenai_services.gateway.ingestion.readers import Unreadable, load_pages


def word_file(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Canal report", 1)
    document.add_paragraph("The Brindle canal is 41 km long.")
    table = document.add_table(rows=2, cols=3)
    for column, text in enumerate(["Lock", "Rise", ""]):
        table.cell(0, column).text = text
    merged = table.cell(1, 0).merge(table.cell(1, 1))
    merged.text = "Top lock"
    table.cell(1, 2).text = "4 m"
    later = document.add_paragraph()
    later.add_run()._r.append(OxmlElement("w:lastRenderedPageBreak"))  # as Word records a page it began
    later.add_run("Its towpath is paved.")
    document.save(str(path))
    return path


def test_a_word_document_is_read_in_order_by_page(tmp_path):
    pages = list(docx_pages(word_file(tmp_path / "report.docx"), 10_000))
    assert [(page.page_content, page.metadata) for page in pages] == [
        ("Canal report\n\nThe Brindle canal is 41 km long.\n\nLock | Rise | \nTop lock | 4 m", {"page": 0}),
        ("Its towpath is paved.", {"page": 1}),
    ]


def test_a_deck_is_read_slide_by_slide(tmp_path):
    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Quarterly review"
    first.placeholders[1].text = "Revenue rose 12%."
    first.notes_slide.notes_text_frame.text = "Mention the Zorblat deal."
    second = deck.slides.add_slide(deck.slide_layouts[6])
    group = second.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(1)).text_frame.text = "Grouped note"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(4), Inches(1)).table
    for row, column, text in ((0, 0, "Region"), (0, 1, "Sales"), (1, 0, "North"), (1, 1, "1200")):
        table.cell(row, column).text = text
    deck.slides.add_slide(deck.slide_layouts[6])  # an empty slide keeps its number
    path = tmp_path / "review.pptx"
    deck.save(str(path))
    assert [(slide.page_content, slide.metadata) for slide in pptx_slides(path)] == [
        ("Quarterly review\nRevenue rose 12%.\nMention the Zorblat deal.", {"slide": 1}),
        ("Grouped note\nRegion | Sales\nNorth | 1200", {"slide": 2}),
        ("", {"slide": 3}),
    ]


def workbook_file(path: Path) -> Path:
    workbook = Workbook()
    sales = workbook.active
    sales.title = "Sales"
    sales.append(["Region", "Amount", "Since"])
    for number in range(1, 30):
        sales.append([f"Region {number}", number * 100.0, datetime.date(2024, 1, number % 28 + 1)])
    people = workbook.create_sheet("People")
    people.append(["Name"])
    people["A5"] = "Odile"
    workbook.create_sheet("Empty")
    workbook.save(path)
    return path


def test_a_workbook_is_read_sheet_by_sheet_as_records_with_their_rows(tmp_path):
    texts = list(xlsx_records(workbook_file(tmp_path / "book.xlsx"), 200))
    assert texts[0].page_content.startswith("Region: Region 1; Amount: 100; Since: 2024-01-02\nRegion: Region 2;")
    assert texts[0].metadata == {"sheet": "Sales", "rows": "2-5"}
    assert all(len(text.page_content) <= 200 for text in texts)
    assert texts[-1].page_content == "Name: Odile" and texts[-1].metadata == {"sheet": "People", "rows": "5"}


def test_a_workbook_s_declared_dimension_is_not_trusted(tmp_path):
    path = workbook_file(tmp_path / "book.xlsx")
    swollen = tmp_path / "swollen.xlsx"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(swollen, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "xl/worksheets/sheet2.xml":  # People: a dimension of every column and row
                data = data.replace(b'<dimension ref="A1:A5"/>', b'<dimension ref="A1:XFD1048576"/>')
            target.writestr(item, data)
    texts = list(xlsx_records(swollen, 200))  # not 16,384 columns of a million rows
    assert texts[-1].page_content == "Name: Odile"


def test_a_broken_sheet_is_unreadable(tmp_path):
    path = workbook_file(tmp_path / "book.xlsx")
    broken = tmp_path / "broken.xlsx"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            target.writestr(item, data[: len(data) // 2] if item.filename == "xl/worksheets/sheet1.xml" else data)
    with pytest.raises(Unreadable):
        list(load_pages(broken, "xlsx", 1000))


def test_a_file_that_is_no_archive_is_unreadable(tmp_path):
    path = tmp_path / "fake.docx"
    path.write_bytes(b"plain text, not a zip archive")
    with pytest.raises(Unreadable, match="no DOCX file"):
        check_package(path, "docx", 10**6, 10**6)


def test_a_package_is_measured_by_what_it_unpacks_to(tmp_path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/media/image1.png", b"\0" * 2_000_000)  # 2 MB in a couple of kB
    assert bomb.stat().st_size < 10_000
    with pytest.raises(TooLarge, match="MAX_UPLOAD_BYTES"):
        check_package(bomb, "docx", 1_000_000, 10**9)
    check_package(bomb, "docx", 3_000_000, 1000)  # a picture is no XML parsed whole


def test_a_workbook_s_sheets_are_streamed_and_the_rest_of_its_xml_is_not(tmp_path):
    path = workbook_file(tmp_path / "book.xlsx")
    with zipfile.ZipFile(path) as archive:
        sizes = {item.filename: item.file_size for item in archive.infolist()}
    sheets = sum(size for name, size in sizes.items() if name.startswith("xl/worksheets/"))
    others = sum(size for name, size in sizes.items() if name.endswith((".xml", ".rels")))
    check_package(path, "xlsx", 10**6, others - sheets)
    with pytest.raises(TooLarge, match="MAX_PARSED_BYTES"):
        check_package(path, "xlsx", 10**6, others - sheets - 1)
    with pytest.raises(TooLarge, match="MAX_PARSED_BYTES"):
        check_package(word_file(tmp_path / "report.docx"), "docx", 10**6, 1000)


def test_each_office_kind_is_read_through_load_pages(tmp_path):
    stream = io.BytesIO()
    Presentation().save(stream)
    (tmp_path / "empty.pptx").write_bytes(stream.getvalue())
    assert list(load_pages(tmp_path / "empty.pptx", "pptx")) == []
    assert [page.metadata for page in load_pages(word_file(tmp_path / "report.docx"), "docx")] == [
        {"page": 0}, {"page": 1}]
    assert {page.metadata["sheet"] for page in load_pages(workbook_file(tmp_path / "b.xlsx"), "xlsx", 100)} == {
        "Sales", "People"}
