"""Text handed over in sections of bounded size, cut at a paragraph or line break, as it is read.

Loaders feed their text here block by block and the splitter chunks one section at a time, so the memory an
ingest takes is set by the section size, not by the document's; chunks differ from splitting the whole text only
where a section ends, at a break the splitter would likely have cut at too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*(?:\n[ \t\r\f\v]*)+")


class Sections:
    """Text appended piece by piece, taken out in sections of at most `section_chars` characters."""

    def __init__(self, section_chars: int):
        self.section_chars = section_chars
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def take(self, final: bool = False) -> Iterator[str]:
        """The sections complete so far; with `final`, the rest too."""
        while self.parts and (final or self.size >= self.section_chars):
            text = "".join(self.parts)
            cut = len(text) if len(text) <= self.section_chars else self._cut(text[: self.section_chars])
            self.parts = [text[cut:]] if cut < len(text) else []
            self.size = len(text) - cut
            section = _BLANK_LINES.sub("\n\n", text[:cut]).strip()
            if section:
                yield section

    def _cut(self, window: str) -> int:
        """Where to end a section: the last paragraph break in its second half, else the last line break, else the
        last space, else anywhere."""
        paragraph = window.rfind("\n\n")
        if paragraph >= len(window) // 2:
            return paragraph + 2
        for separator in ("\n", " "):
            if (found := window.rfind(separator)) > 0:
                return found + 1
        return len(window)


def text_sections(blocks: Iterable[str], section_chars: int) -> Iterator[str]:
    """Plain text (or Markdown) fed in `blocks`, in sections."""
    sections = Sections(section_chars)
    for block in blocks:
        sections.add(block)
        yield from sections.take()
    yield from sections.take(final=True)
