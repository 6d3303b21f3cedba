"""Word documents and Excel workbooks made in memory by the libraries the gateway reads them with, for tests that
upload them."""

from __future__ import annotations

import io
from typing import Any

import docx
from openpyxl import Workbook

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def word_document(*paragraphs: str) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    stream = io.BytesIO()
    document.save(stream)
    return stream.getvalue()


def workbook(sheets: dict[str, list[list[Any]]]) -> bytes:
    """A workbook of these sheets, each a list of rows (the first its header)."""
    book = Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    stream = io.BytesIO()
    book.save(stream)
    return stream.getvalue()
