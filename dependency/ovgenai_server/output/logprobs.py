"""Log probabilities in OpenAI's two shapes (chat's `content` list, completions' parallel lists), and the scores a
stream holds back until the text they belong to goes out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..engine.contract.interface import PromptBuilder
from ..engine.contract.types import SequenceDelta


def chat_logprobs(prompts: PromptBuilder, token_ids: Sequence[int], logprobs: Sequence[float],
                  alternatives: bool = False) -> dict[str, Any]:
    """`alternatives` (top_logprobs 1): each token's `top_logprobs` lists the chosen token itself, the only one the
    engine scores, as OVMS lists it."""
    content = []
    for token_id, logprob in zip(token_ids, logprobs, strict=False):
        token = prompts.decode([token_id])
        entry = {"token": token, "logprob": logprob, "bytes": list(token.encode())}
        content.append({**entry, "top_logprobs": [entry] if alternatives else []})
    return {"content": content}


def completion_logprobs(prompts: PromptBuilder, token_ids: Sequence[int], logprobs: Sequence[float | None],
                        alternatives: bool = False) -> dict[str, Any]:
    """`alternatives` (logprobs 1): each position's `top_logprobs` maps the chosen token to its own log probability
    (null where the token has none: the prompt's first), as OVMS answers."""
    tokens = [prompts.decode([t]) for t in token_ids]
    values = list(logprobs[: len(tokens)])
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    top = [None if value is None else {token: value} for token, value in zip(tokens, values, strict=False)]
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": top if alternatives else None,
            "text_offset": offsets}


class HeldScores:
    """Each choice's token scores not sent yet: a token that produced no text of its own (part of a character, a
    tag being read, the end token) waits for the next text, or for the choice's last chunk."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[list[int], list[float]]] = {}

    def add(self, delta: SequenceDelta) -> None:
        ids, values = self._held.setdefault(delta.index, ([], []))
        ids.extend(delta.token_ids or [])
        values.extend(delta.logprobs or [])

    def take(self, index: int) -> tuple[list[int], list[float]]:
        return self._held.pop(index, ([], []))
