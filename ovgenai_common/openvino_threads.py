"""Calling OpenVINO from several threads: its Python bindings must be used once from one thread first.

Reading `.data` of a tensor that openvino_genai returns (a tokenizer's `input_ids`, `attention_mask`) initialises
state inside OpenVINO's Python bindings on first use, under a C++ static-initialisation guard, and that
initialisation calls back into Python. When two threads reach it for the first time together, one holds the guard
and waits for the GIL while the other holds the GIL and waits for the guard: both wait forever, and with them the
process (it happened often enough to hang the backend's first concurrent chat requests: bench/results.md). The
state is initialised once per process, so
doing one such call on the thread that loads the model, before any request can arrive, removes the race.
"""

from __future__ import annotations

from typing import Any


def prime_tokenizer_outputs(tokenizer: Any) -> None:
    """Encode one short text with `tokenizer` (an openvino_genai.Tokenizer) and read its tensors, so that the
    bindings' one-time initialisation is done here, on one thread, before request threads use them."""
    encoded = tokenizer.encode(["a"])
    encoded.input_ids.data.sum()
    encoded.attention_mask.data.sum()
