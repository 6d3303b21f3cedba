"""Each kind of file read as a stream of bounded sections, then split into chunks by langchain-text-splitters.

Nothing is ever held whole: a PDF is read page by page (pypdf); text, Markdown and HTML are read in blocks and
handed on in sections of at most SECTION_CHARS characters (HTML through a streaming parser, html_text.py), so the
memory an ingest takes does not grow with the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from ovgenai_common.errors import APIError, ErrorKind

from .html_text import html_sections
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


def load_pages(path: Path, kind: str) -> Iterator[Document]:
    """The file's text as Documents of bounded size: a PDF's pages, other files' sections (page 0)."""
    try:
        if kind == "pdf":
            yield from _pdf_pages(path)
            return
        sections = html_sections if kind == "html" else text_sections
        for section in sections(_blocks(path), SECTION_CHARS):
            yield Document(section, metadata={"page": 0})
    except Exception as error:  # a parser's failure is the upload's fault: say so
        raise APIError(
            ErrorKind.INVALID_REQUEST, f"Could not read the file as {kind}: {type(error).__name__}: {error}", "files"
        ) from error


def splitter(chunk_size: int, chunk_overlap: int, kind: str) -> RecursiveCharacterTextSplitter:
    if kind == "markdown":
        from langchain_text_splitters import MarkdownTextSplitter

        return MarkdownTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
