"""Tokens and the tokenizer's limits.

Token ids sent by clients are checked against the model's vocabulary before they reach a tokenizer or engine: an id
outside the vocabulary would be an out-of-bounds read of the embedding table (the engine does not check), and an
integer beyond int64 cannot even be put into a tensor. vLLM answers both with 400; so does every service here.

A tokenizer may also cut long texts on its own: openvino-genai's GGUF reader builds one that keeps only the last
8,192 tokens of any text, whatever the model's context, and says nothing. `truncation_limit` finds such a limit by
measuring, so that a text that reaches it is refused instead of losing its beginning.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .errors import APIError, ErrorKind


def vocabulary_size(tokenizer: Any) -> int | None:
    """The number of token ids an openvino_genai Tokenizer knows, or None if it cannot say."""
    try:
        ids = tokenizer.get_vocab().values()  # token -> id; a few tokens may share a spelling, so not len()
        return max(ids) + 1 if ids else None
    except Exception:  # a tokenizer whose vocabulary does not decode: the int64 bound still applies
        return None


def check_token_ids(ids: Iterable[int], vocabulary: int | None, param: str) -> None:
    limit = vocabulary or 2**63
    for token in ids:
        if not 0 <= token < limit:
            shown = str(token) if len(str(token)) <= 24 else str(token)[:20] + "…"
            raise APIError(
                ErrorKind.INVALID_REQUEST,
                f"Token id {shown} in '{param}' is outside the model's vocabulary (ids 0 to {limit - 1}).",
                param,
            )


PROBED_TOKENS = 65_536  # at least this far, so that /tokenize counts long texts right too (probed once, at start)


def truncation_limit(tokenizer: Any, beyond: int) -> int | None:
    """The token count at which `tokenizer` cuts a text, if it cuts any text of up to `beyond` tokens; else None.

    Measured, not read from the tokenizer's graph: a word repeated n times is n tokens or more, so a tokenizer that
    gives one as many tokens as the same word repeated 2n times has stopped counting at that number."""
    words = max(beyond, PROBED_TOKENS) + 16

    def count(repeats: int) -> int:
        return len(tokenizer.encode("hello " * repeats, add_special_tokens=False).input_ids.data[0])

    limit = count(words)
    return limit if count(2 * words) == limit else None
