"""The KV cache's size per token, read from the default model's IR."""

from __future__ import annotations

from ovgenai_server.engine.contract.kv_cache import (
    kv_elements_per_token,
)
from tests.support.servers import DEFAULT_MODEL, MODELS


def test_the_cache_per_token_is_read_from_the_model(default_model):  # noqa: ARG001 - needs the model prepared
    # SmolLM2-135M: 30 layers, keys and values, 3 KV heads of 64 values.
    assert kv_elements_per_token(MODELS / DEFAULT_MODEL / "openvino_model.xml") == 30 * 2 * 3 * 64
    assert kv_elements_per_token(MODELS / "absent.xml") is None
