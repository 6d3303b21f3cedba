"""A sequence's text cut where its first stop string begins, as OpenAI returns it ("the returned text will not
contain the stop sequence"), and the request ended there (engine/runtime.py), as vLLM ends it.

openvino_genai's own stop strings remove whole tokens, and only those it reckons the string took: one that ended
inside a token stayed in the text ("swer" left "The answer"), one that began inside a token took the token's text
before it ("Paris" took the space of " Paris"), and one ending in whitespace was cut off with it, so "\n" never
showed as the string matched. So the engine is not told them (but for prompts with images:
engine/generation_config.py), and the text is cut here, character-exact. While a stream runs, the text that could
be the beginning of a stop string is held back (one character less than the longest one), so nothing that is later
cut has been sent.
"""

from __future__ import annotations

from collections.abc import Sequence


class StopText:
    """The emitted text of one sequence, given its decoded text as it grows."""

    __slots__ = ("_stops", "_hold", "_tail", "_sent", "stopped", "matched")

    def __init__(self, stops: Sequence[str]):
        self._stops = tuple(stops)
        self._hold = max(map(len, self._stops)) - 1
        self._tail = ""  # the text not yet sent, after the last `_hold` characters sent (a match may begin there)
        self._sent = 0  # how much of `_tail` was sent
        self.stopped = False  # a stop string was found: nothing more is emitted
        self.matched: str | None = None  # the stop string the text ended at (vLLM's stop_reason)

    def feed(self, text: str, final: bool) -> str:
        """The next piece of text to emit, given the sequence's next decoded `text`."""
        if self.stopped:
            return ""
        searched = len(self._tail)
        self._tail += text
        # A match not found before ends in the new text, so begins at most `_hold` characters before it.
        start = max(0, searched - self._hold)
        found = [(at, stop) for stop in self._stops if (at := self._tail.find(stop, start)) >= 0]
        if found:
            at, self.matched = min(found, key=lambda match: match[0])
            self.stopped = True
            return self._tail[self._sent : max(at, self._sent)]
        end = len(self._tail) if final else max(self._sent, len(self._tail) - self._hold)
        out = self._tail[self._sent : end]
        keep = max(0, end - self._hold)
        self._tail, self._sent = self._tail[keep:], end - keep
        return out
