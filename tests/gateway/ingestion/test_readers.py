"""Files read as streams of bounded sections: the memory a large file takes is set by the section size, not by the
file; a file a parser cannot read is Unreadable, saying what the parser said; each kind goes to its reader (its own
tests: test_office.py, test_records.py); Markdown is split at its own structure."""

from __future__ import annotations

import io

import pytest
from langchain_text_splitters import MarkdownTextSplitter, RecursiveCharacterTextSplitter
from pypdf import PdfReader, PdfWriter

from ovgenai_services.gateway.ingestion.readers import SECTION_CHARS, Unreadable, load_pages, splitter
from tests.gateway.facts import minimal_pdf


def test_text_sections_of_a_file_and_its_pages(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("\n\n".join(f"Line {i} of a long file." for i in range(50_000)))
    pages = list(load_pages(path, "text"))
    assert len(pages) > 1 and all(len(p.page_content) <= SECTION_CHARS for p in pages)
    assert {p.metadata["page"] for p in pages} == {0}
    assert pages[-1].page_content.endswith("Line 49999 of a long file.")


def test_a_pdf_is_read_page_by_page_each_numbered_from_zero(tmp_path):
    writer = PdfWriter()
    for line in ("The Quorra comet returns every 61 years.", "Its tail is green."):
        writer.append(PdfReader(io.BytesIO(minimal_pdf(line))))
    path = tmp_path / "two.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    pages = list(load_pages(path, "pdf"))
    assert [(page.page_content, page.metadata) for page in pages] == [
        ("The Quorra comet returns every 61 years.", {"page": 0}), ("Its tail is green.", {"page": 1})]


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.html"
    path.write_bytes("<p>café</p>".encode("latin-1"))
    with pytest.raises(Unreadable, match="UnicodeDecodeError"):
        list(load_pages(path, "html"))


def test_a_pdf_that_is_not_one_is_refused(tmp_path):
    path = tmp_path / "fake.pdf"
    path.write_bytes(b"not a PDF at all")
    with pytest.raises(Unreadable, match="PdfStreamError"):
        list(load_pages(path, "pdf"))


def test_markdown_is_split_at_its_headings_other_kinds_by_characters():
    assert isinstance(splitter(100, 10, "markdown"), MarkdownTextSplitter)
    for kind in ("text", "html", "pdf"):
        chosen = splitter(100, 10, kind)
        assert type(chosen) is RecursiveCharacterTextSplitter
        assert (chosen._chunk_size, chosen._chunk_overlap) == (100, 10)
