"""Tags found in text that arrives in pieces (`<tool_call>`, `</think>`): a tag may be split across two pieces."""

from __future__ import annotations


def held_prefix(text: str, tag: str) -> int:
    """How many characters at the end of `text` could be the start of `tag` (held back until the next piece)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
