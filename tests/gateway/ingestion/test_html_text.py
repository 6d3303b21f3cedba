"""HTML's text read as a stream: what a reader sees (no scripts, styles, templates or comments), block boundaries
kept as paragraph breaks, handed over in bounded sections whatever the blocks it is fed."""

from __future__ import annotations

from ovgenai_services.gateway.ingestion.html_text import html_sections

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


def test_html_sections_are_bounded_and_lose_no_paragraph():
    paragraphs = [f"Paragraph {i} tells of canal number {i}." for i in range(5000)]
    html = "<div>" + "".join(f"<p>{p}</p>" for p in paragraphs) + "</div>"
    sections = list(html_sections(feed(html, 4096), 10_000))
    assert len(sections) > 10 and all(len(section) <= 10_000 for section in sections)
    assert [line for section in sections for line in section.split("\n\n")] == paragraphs


def test_a_run_of_empty_blocks_is_one_paragraph_break_and_skipped_elements_add_none():
    assert list(html_sections(["<p>a</p><p></p><br><p></p><p>b</p>"], 1000)) == ["a\n\nb"]
    page = "<div><div><p></p></div></div>One<script><style>x</style>y<p>q</p></script>Two"
    assert list(html_sections([page], 1000)) == ["OneTwo"]
