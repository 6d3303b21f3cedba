"""The embedding service's request models accept exactly what their OpenAPI document describes (the fuzzer's
findings, kept as tests)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ovgenai_services.embedding.protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest


@pytest.mark.parametrize("model, body", [
    (TEIEmbedRequest, '{"inputs": ["a"], "truncate": 0.0}'),
    (TEIEmbedRequest, '{"inputs": ["a"], "normalize": "false"}'),
    (EmbeddingRequest, '{"input": "a", "dimensions": "8"}'),
    (EmbeddingRequest, '{"input": "a", "truncate_prompt_tokens": "8"}'),
    (EmbeddingRequest, '{"input": "a", "truncate_prompt_tokens": -2}'),
    (EmbeddingRequest, '{"input": "a", "input_type": "classification"}'),
    (TEIEmbedRequest, '{"inputs": "a", "dimensions": 0}'),
    (RerankRequest, '{"query": "q", "texts": ["a"], "top_n": 1.0}'),
])
def test_values_of_another_type_are_refused(model, body):
    with pytest.raises(ValidationError):
        model.model_validate_json(body)


def test_bodies_are_documented_as_closed():
    assert EmbeddingRequest.model_json_schema()["additionalProperties"] is False
