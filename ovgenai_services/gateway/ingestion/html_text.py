"""An HTML page's text, read as a stream: memory bounded by the section being built, not by the page.

A tree builder (BeautifulSoup, lxml.html) keeps an object per element, hundreds of MB for a few MiB of small tags;
this feeds the page to lxml's libxml2 HTML parser block by block with a parser target instead of a tree, keeps the
text outside scripts, styles and templates (as BeautifulSoup's `get_text()` does), marks block boundaries with line
breaks, and hands the text over in sections as it goes. The standard library's `html.parser` streams too, but
takes quadratic time on some malformed input, so it bounds no CPU. One shape still grows with the page (a single
tag of millions of attributes), which is why HTML is parsed only up to MAX_HTML_BYTES.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lxml import etree

from .sections import Sections

# Their content is not text a reader sees.
SKIPPED = frozenset({"script", "style", "template"})
# Elements that start a new line when rendered; a break keeps their texts from running into each other.
BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p",
    "pre", "section", "summary", "table", "td", "th", "title", "tr", "ul",
})


class _TextTarget:
    """An lxml parser target: called back per start tag, end tag and piece of text; no element is kept."""

    def __init__(self, sections: Sections):
        self.sections = sections
        self.skipping = 0  # how many script/style/template elements the parser is inside
        self.breaks = 0  # line breaks added since the last text: two make a paragraph, more say nothing

    def start(self, tag: str, attrib: dict) -> None:
        del attrib  # never kept
        if tag in SKIPPED:
            self.skipping += 1
        elif tag in BLOCKS:
            self._break()

    def end(self, tag: str) -> None:
        if tag in SKIPPED:
            self.skipping = max(0, self.skipping - 1)
        elif tag in BLOCKS:
            self._break()

    def data(self, data: str) -> None:
        if not self.skipping:
            self.sections.add(data)
            self.breaks = 0

    def close(self) -> None:
        return None

    def _break(self) -> None:
        if not self.skipping and self.breaks < 2:
            self.sections.add("\n")
            self.breaks += 1


def html_sections(blocks: Iterable[str], section_chars: int) -> Iterator[str]:
    """The text of the HTML fed in `blocks`, in sections of about `section_chars` characters."""
    sections = Sections(section_chars)
    # No network access, no tree; libxml2's own limits on names and text nodes stay on (huge_tree off).
    parser = etree.HTMLParser(target=_TextTarget(sections), no_network=True, huge_tree=False)
    for block in blocks:
        parser.feed(block)
        yield from sections.take()
    parser.close()
    yield from sections.take(final=True)
