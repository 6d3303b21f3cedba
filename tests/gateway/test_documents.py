"""Files read as streams of bounded sections: HTML's text without scripts and styles, block by block; the memory a
large file takes is set by the section size, not by the file."""

from __future__ import annotations

import tracemalloc

import pytest

from microservices.gateway.documents import SECTION_CHARS, load_pages
from microservices.gateway.html_text import html_sections
from microservices.gateway.sections import text_sections
from ovgenai_common.errors import APIError

PAGE = ("<!doctype html><html><head><title>Canals</title><style>p { color: teal; }</style>"
        "<script>var secretToken = '</p>do-not-index';</script></head><body><h1>Canals</h1>"
        "<p>The Moonwick canal is 42&nbsp;kilometres long &amp; 9 metres wide.</p><p>Locks: 12</p>"
        "<template><p>hidden template</p></template><br/>Tail<!-- a comment --></body></html>")


def feed(text: str, size: int = 7):
    return (text[i:i + size] for i in range(0, len(text), size))


def test_html_text_keeps_what_a_reader_sees_block_by_block():
    [text] = list(html_sections(feed(PAGE), 1000))  # fed a few characters at a time, tags cut anywhere
    assert text.split("\n\n") == ["Canals", "Canals", "The Moonwick canal is 42\xa0kilometres long & 9 metres wide.",
                                  "Locks: 12", "Tail"]
    for hidden in ("teal", "secretToken", "do-not-index", "hidden template", "a comment"):
        assert hidden not in text


def test_sections_are_bounded_and_cut_at_breaks_and_lose_nothing():
    paragraphs = [f"Paragraph {i} tells of canal number {i}." for i in range(5000)]
    html = "<div>" + "".join(f"<p>{p}</p>" for p in paragraphs) + "</div>"
    sections = list(html_sections(feed(html, 4096), 10_000))
    assert len(sections) > 10 and all(len(section) <= 10_000 for section in sections)
    assert [line for section in sections for line in section.split("\n\n")] == paragraphs
    text = "\n\n".join(paragraphs)
    sections = list(text_sections(feed(text, 4096), 10_000))
    assert all(len(section) <= 10_000 for section in sections)
    assert [line for section in sections for line in section.split("\n\n")] == paragraphs


def test_a_line_without_breaks_is_cut_at_spaces_then_anywhere():
    words = " ".join(["canal"] * 10_000)
    sections = list(text_sections([words], 1000))
    assert all(len(s) <= 1000 for s in sections) and " ".join(sections) == words
    assert "".join(text_sections(["x" * 2500], 1000)) == "x" * 2500


@pytest.mark.parametrize("element", ["<b></b>", "<p>ab</p>", "<i><u>c</u></i>"])
def test_eight_mebibytes_of_small_tags_take_a_few_mebibytes(tmp_path, element):
    # A tree builder keeps a Python object per element: BeautifulSoup took 360-510 MB for 4 MiB of such tags.
    path = tmp_path / "tags.html"
    path.write_text("<html><body>" + element * (8 * 2**20 // len(element)) + "</body></html>")
    tracemalloc.start()
    try:
        size = sum(len(page.page_content) for page in load_pages(path, "html"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # a few sections' worth, not the page's tree
    assert (size > 0) == (element != "<b></b>")  # the text is kept


def test_text_sections_of_a_file_and_its_pages(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("\n\n".join(f"Line {i} of a long file." for i in range(50_000)))
    pages = list(load_pages(path, "text"))
    assert len(pages) > 1 and all(len(p.page_content) <= SECTION_CHARS for p in pages)
    assert {p.metadata["page"] for p in pages} == {0}
    assert pages[-1].page_content.endswith("Line 49999 of a long file.")


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.html"
    path.write_bytes("<p>café</p>".encode("latin-1"))
    with pytest.raises(APIError) as refused:
        list(load_pages(path, "html"))
    assert refused.value.status == 400 and "Could not read the file as html" in refused.value.message
