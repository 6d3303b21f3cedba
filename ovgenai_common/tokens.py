"""Token ids sent by clients: checked against the model's vocabulary before they reach a tokenizer or engine.

An id outside the vocabulary would be an out-of-bounds read of the embedding table (the engine does not check), and
an integer beyond int64 cannot even be put into a tensor. vLLM answers both with 400; so does every service here.
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
