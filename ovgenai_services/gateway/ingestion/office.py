"""Office files, each a zip archive of XML parts: Word documents (python-docx), PowerPoint decks (python-pptx) and
Excel workbooks (openpyxl in read-only mode).

A few kilobytes of zip can unpack to gigabytes, and python-docx and python-pptx load every part of a file, its XML
as trees, so a file is measured before it is opened (`check_package`): its parts may unpack to no more than an
upload may be (MAX_UPLOAD_BYTES), and the XML parsed whole to MAX_PARSED_BYTES. A workbook's sheets are the
exception: openpyxl streams them row by row, so only the rest of its XML (shared strings, styles) counts.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from langchain_core.documents import Document

from .records import Unreadable, grouped, record_lines, span
from .sections import Sections

OFFICE = frozenset({"docx", "pptx", "xlsx"})
WORKSHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}Override"
XML_PARTS = (".xml", ".rels", ".vml")
# A package's [Content_Types].xml is a list of its parts: a larger one is no Office file.
MAX_CONTENT_TYPES = 1 << 20


class TooLarge(Exception):
    """The file unpacks past a limit; the message says which."""


def _worksheets(archive: zipfile.ZipFile) -> set[str]:
    """The parts a workbook declares as worksheets (openpyxl streams them)."""
    try:
        info = archive.getinfo("[Content_Types].xml")
    except KeyError as error:
        raise Unreadable("it has no [Content_Types].xml, so it is no Office file") from error
    if info.file_size > MAX_CONTENT_TYPES:
        raise Unreadable("its [Content_Types].xml is too large for an Office file")
    root = ElementTree.fromstring(archive.read(info))
    return {override.get("PartName", "").lstrip("/") for override in root.iter(_TYPES)
            if override.get("ContentType") == WORKSHEET}


def check_package(path: Path, kind: str, max_unpacked: int, max_parsed: int) -> None:
    """Unreadable where the file is no zip archive; TooLarge where its parts unpack past `max_unpacked` in all, or
    the XML its reader parses whole past `max_parsed`. Sizes as the archive declares them: zipfile reads no member
    past its declared size."""
    try:
        with zipfile.ZipFile(path) as archive:
            parts = archive.infolist()
            streamed = _worksheets(archive) if kind == "xlsx" else set()
    except (zipfile.BadZipFile, ElementTree.ParseError) as error:
        raise Unreadable(f"it is no {kind.upper()} file ({error})") from error
    unpacked = sum(part.file_size for part in parts)
    if unpacked > max_unpacked:
        raise TooLarge(f"unpacks to {unpacked} bytes, more than an upload may be ({max_unpacked}, MAX_UPLOAD_BYTES)")
    parsed = sum(part.file_size for part in parts
                 if part.filename.lower().endswith(XML_PARTS) and part.filename not in streamed)
    if parsed > max_parsed:
        raise TooLarge(f"holds {parsed} bytes of XML read whole, more than {max_parsed} (MAX_PARSED_BYTES)")


def _row_text(cells: list[Any]) -> str:
    """A table row's cells, a merged cell once."""
    texts: list[str] = []
    previous = None
    for cell in cells:
        # A Word cell merged across columns is one element in each; a PowerPoint cell a merge covers is "spanned".
        if cell._tc is not previous and not getattr(cell, "is_spanned", False):
            texts.append(cell.text.strip())
        previous = cell._tc
    return " | ".join(texts)


def docx_pages(path: Path, section_chars: int) -> Iterator[Document]:
    """A Word document's paragraphs and tables in order, in sections of at most `section_chars`, each with its page
    as Word last laid the document out (the page breaks it records on saving; 0 where it never did), counted from 0
    as a PDF's are. Headers, footers and comments are left out."""
    import docx
    from docx.table import Table

    page, sections = 0, Sections(section_chars)
    for block in docx.Document(str(path)).iter_inner_content():
        if isinstance(block, Table):
            sections.add("\n".join(_row_text(row.cells) for row in block.rows) + "\n\n")
            continue
        if breaks := len(block.rendered_page_breaks):  # the paragraph begins a page (or runs onto the next)
            yield from (Document(text, metadata={"page": page}) for text in sections.take(final=True))
            page += breaks
        sections.add(block.text + "\n\n")
        yield from (Document(text, metadata={"page": page}) for text in sections.take())
    yield from (Document(text, metadata={"page": page}) for text in sections.take(final=True))


def _shape_texts(shape: Any) -> Iterator[str]:
    """A shape's text: its text frame, its table's rows, a group's shapes in turn."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in shape.shapes:
            yield from _shape_texts(inner)
    elif shape.has_text_frame:
        yield shape.text_frame.text
    elif shape.has_table:
        yield from (_row_text(list(row.cells)) for row in shape.table.rows)


def pptx_slides(path: Path) -> Iterator[Document]:
    """Each slide's text (its shapes', then its speaker notes'), with its number from 1 as PowerPoint shows it."""
    from pptx import Presentation

    for number, slide in enumerate(Presentation(str(path)).slides, start=1):
        texts = [text.strip() for shape in slide.shapes for text in _shape_texts(shape)]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            texts.append(slide.notes_slide.notes_text_frame.text.strip())
        yield Document("\n".join(text for text in texts if text), metadata={"slide": number})


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):  # a date, a time of day, or a date with its time (midnight left out)
        return value.isoformat(sep=" ").removesuffix(" 00:00:00") if hasattr(value, "date") else value.isoformat()
    return str(value)


def xlsx_records(path: Path, max_chars: int) -> Iterator[Document]:
    """Each worksheet's rows as records (records.py), cells' values as last computed, in texts of at most
    `max_chars`, each with its sheet's name and rows as Excel numbers them."""
    from openpyxl import load_workbook

    workbook = load_workbook(path, read_only=True, data_only=True)
    try:
        for sheet in workbook.worksheets:
            # The dimension a file declares is not trusted: a false one pads every row to thousands of columns.
            sheet.reset_dimensions()
            rows = ((number, [_cell_text(value) for value in values])
                    for number, values in enumerate(sheet.iter_rows(values_only=True), start=1))
            for text, first, last in grouped(record_lines(rows), max_chars):
                yield Document(text, metadata={"sheet": sheet.title, "rows": span(first, last)})
    finally:
        workbook.close()
