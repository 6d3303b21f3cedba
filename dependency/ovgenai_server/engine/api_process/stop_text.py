"""A sequence's text cut where its first stop string begins, as OpenAI returns it ("the returned text will not
contain the stop sequence"), and the request ended there (engine/api_process/runtime.py), as vLLM ends it.

openvino_genai's own stop strings remove whole tokens, and only those it reckons the string took: one that ended inside
a token stayed in the text ("swer" left "The answer"), one that began inside a token took the token's text before it
("Paris" took the space of " Paris"), and one ending in whitespace was cut off with it, so "\n" never showed as the
string matched. So the engine is not told them (but for prompts with images:
engine/engine_process/generation_config.py), and the text is cut here, character-exact. While a stream runs, the end of
the text that a stop string begins with is held back (as llama.cpp holds it), so nothing that is later cut has been sent
and nothing else waits."""

from __future__ import annotations

from collections.abc import Sequence


class StopText:
    """The emitted text of one sequence, given its decoded text as it grows."""

    __slots__ = ("_stops", "_tail", "stopped", "matched")

    def __init__(self, stops: Sequence[str]):
        self._stops = tuple(stops)
        self._tail = ""  # the text held back: the end of the text so far that a stop string begins with
        self.stopped = False  # a stop string was found: nothing more is emitted
        self.matched: str | None = None  # the stop string the text ended at (vLLM's stop_reason)

    def feed(self, text: str, final: bool, armed: bool = True) -> str:
        """The next piece of text to emit, given the sequence's next decoded `text`. Until `armed` (the request's
        min_tokens reached) no stop string is looked for, and the text goes out whole."""
        if self.stopped:
            return ""
        if not armed:
            return text
        # A match begins in the text held back or in the new text: what was sent could begin none.
        tail = self._tail + text
        found = [(at, stop) for stop in self._stops if (at := tail.find(stop)) >= 0]
        if found:
            at, self.matched = min(found, key=lambda match: match[0])
            self.stopped, self._tail = True, ""
            return tail[:at]
        end = len(tail) - (0 if final else self._held(tail))
        self._tail = tail[end:]
        return tail[:end]

    def _held(self, tail: str) -> int:
        """How long the longest end of `tail` is that a stop string begins with (the rest of it may follow)."""
        longest = 0
        for stop in self._stops:
            at = tail.find(stop[0], max(0, len(tail) - len(stop) + 1))
            while at >= 0 and len(tail) - at > longest:
                if stop.startswith(tail[at:]):
                    longest = len(tail) - at
                    break
                at = tail.find(stop[0], at + 1)
        return longest
