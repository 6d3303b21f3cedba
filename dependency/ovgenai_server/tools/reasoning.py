"""A thinking model's reasoning, split from its answer as it streams (`reasoning_content`, as vLLM and OVMS return it).

The models served with a `reasoning_parser` (OVMS's and vLLM's names: `qwen3`, `deepseek_r1`, `phi4`) all write
their reasoning between `<think>` and `</think>`. Some write the opening tag themselves (Qwen3); others' templates end
the prompt with it (DeepSeek-R1 distills, Qwen3 "thinking" variants), so the output starts inside the reasoning:
which one is read from the rendered prompt. An answer that does not open with the tag has no reasoning (a thinking
model asked not to think); a reasoning the output never closes is all reasoning (cut short by max_tokens).

openvino_genai 2026.4's `ReasoningIncrementalParser` is not used: for an answer that does not start with `<think>`
it returns nothing at all, so a model that answers without thinking would stream an empty answer.
"""

from __future__ import annotations

from typing import Literal, get_args

from ovgenai_common.settings import ReasoningParserName

from .tags import held_prefix

REASONING_PARSERS = get_args(ReasoningParserName)
OPEN, CLOSE = "<think>", "</think>"


def starts_inside(prompt: str) -> bool:
    """Whether the chat template opened the reasoning for the model (the prompt ends with the opening tag)."""
    return prompt.rstrip().endswith(OPEN)


class ReasoningSplitter:
    """One choice's output as (reasoning, answer) pieces: `feed` each piece, then `finish`."""

    def __init__(self, inside: bool):
        self._state: Literal["start", "reasoning", "after", "answer"] = "reasoning" if inside else "start"
        self._pending = ""
        self.reasoned = inside  # whether the output has a reasoning part (reasoning_content is set, even if empty)

    def feed(self, piece: str) -> tuple[str, str]:
        self._pending += piece
        reasoning = answer = ""
        while True:
            if self._state == "start":
                head = self._pending.lstrip()
                if not head or (OPEN.startswith(head) and head != OPEN):
                    return reasoning, answer  # too early to say
                if head.startswith(OPEN):
                    self._state, self._pending, self.reasoned = "reasoning", head[len(OPEN):], True
                    continue
                self._state = "answer"
                continue
            if self._state == "reasoning":
                at = self._pending.find(CLOSE)
                if at < 0:
                    keep = held_prefix(self._pending, CLOSE)
                    reasoning += self._pending[: len(self._pending) - keep]
                    self._pending = self._pending[len(self._pending) - keep:]
                    return reasoning, answer
                reasoning += self._pending[:at]
                self._state, self._pending = "after", self._pending[at + len(CLOSE):]
                continue
            if self._state == "after":  # the blank lines between reasoning and answer belong to neither
                self._pending = self._pending.lstrip()
                if not self._pending:
                    return reasoning, answer
                self._state = "answer"
            answer += self._pending
            self._pending = ""
            return reasoning, answer

    def finish(self) -> tuple[str, str]:
        rest, self._pending = self._pending, ""
        if self._state == "reasoning":
            return rest, ""
        if self._state == "after":
            return "", ""
        return "", rest
