"""Each kind of file read as a stream of bounded sections, each with where in the file it is (its metadata), then
split into chunks by langchain-text-splitters.

Nothing is ever held whole: a PDF is read page by page (pypdf); text, Markdown and HTML are read in blocks and
handed on in sections of at most SECTION_CHARS characters (HTML through a streaming parser, html_text.py), so the
memory an ingest takes does not grow with the file. Office files (office.py) and CSV and JSON (records.py) say where
each section is: a page, a slide, a sheet and its rows, a CSV's rows, a JSON path; the files that are read whole
(JSON, and a Word or PowerPoint file's parts) are measured by ingestion before they are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from . import office, records
from .html_text import html_sections
from .records import Unreadable
from .sections import text_sections

# Characters read at a time, and the most handed to the splitter at once.
READ_CHARS = 1 << 16
SECTION_CHARS = 1 << 18


def _blocks(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as handle:  # strict: a file that is not UTF-8 is refused, not garbled
        while block := handle.read(READ_CHARS):
            yield block


def _pdf_pages(path: Path) -> Iterator[Document]:
    from pypdf import PdfReader

    with path.open("rb") as handle:
        for number, page in enumerate(PdfReader(handle).pages):
            yield Document(page.extract_text().strip(), metadata={"page": number})


def _sections(path: Path, kind: str, record_chars: int) -> Iterator[Document]:
    if kind == "pdf":
        yield from _pdf_pages(path)
    elif kind == "docx":
        yield from office.docx_pages(path, SECTION_CHARS)
    elif kind == "pptx":
        yield from office.pptx_slides(path)
    elif kind == "xlsx":
        yield from office.xlsx_records(path, record_chars)
    elif kind == "csv":
        yield from records.csv_records(path, record_chars)
    elif kind == "json":
        yield from records.json_values(path, record_chars)
    else:
        sections = html_sections if kind == "html" else text_sections
        for section in sections(_blocks(path), SECTION_CHARS):
            yield Document(section, metadata={"page": 0})


def load_pages(path: Path, kind: str, record_chars: int = SECTION_CHARS) -> Iterator[Document]:
    """The file's text as Documents of bounded size, each with where it is: a PDF's or Word document's pages, a
    deck's slides, a workbook's sheets and a CSV's rows as records in texts of at most `record_chars` (a chunk's
    size, so that each chunk says its rows), a JSON file's values by path, other files' sections (page 0). A file
    its parser cannot read raises Unreadable, saying why."""
    try:
        yield from _sections(path, kind, record_chars)
    except Unreadable:
        raise
    except Exception as error:  # a parser's failure is the file's fault: say what the parser said
        raise Unreadable(f"{type(error).__name__}: {error}") from error


def splitter(chunk_size: int, chunk_overlap: int, kind: str) -> RecursiveCharacterTextSplitter:
    if kind == "markdown":
        from langchain_text_splitters import MarkdownTextSplitter

        return MarkdownTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
