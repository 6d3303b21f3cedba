"""Request models accept exactly what their OpenAPI document describes (the fuzzer's findings, kept as tests)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from microservices.embedding.protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest
from ovgenai_common.protocol import ChatCompletionRequest, CompletionRequest

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("fields", [
    {"stream": 0.0}, {"stream": "true"}, {"max_tokens": "5"}, {"n": 2.0}, {"logprobs": 1},
    {"messages": [{"role": "user", "content": "hi", "tool_call_id": 5}]},
    {"stream_options": {"include_usage": "yes"}},
])
def test_chat_values_of_another_type_are_refused(fields):
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate_json(json.dumps({"messages": MESSAGES, **fields}))


def test_json_numbers_still_fill_number_fields():
    body = json.dumps({"messages": MESSAGES, "temperature": 1, "top_p": 1})
    request = ChatCompletionRequest.model_validate_json(body)
    assert request.temperature == 1.0 and request.top_p == 1.0
    assert CompletionRequest.model_validate_json('{"prompt": [1, 2], "echo": false}').prompt == [1, 2]


@pytest.mark.parametrize("model, body", [
    (TEIEmbedRequest, '{"inputs": ["a"], "truncate": 0.0}'),
    (TEIEmbedRequest, '{"inputs": ["a"], "normalize": "false"}'),
    (EmbeddingRequest, '{"input": "a", "dimensions": "8"}'),
    (RerankRequest, '{"query": "q", "texts": ["a"], "top_n": 1.0}'),
])
def test_embedding_values_of_another_type_are_refused(model, body):
    with pytest.raises(ValidationError):
        model.model_validate_json(body)


def test_openai_bodies_are_documented_as_closed():
    schema = ChatCompletionRequest.model_json_schema()
    assert schema["additionalProperties"] is False
    assert "user" in schema["properties"]  # accepted and ignored, so documented
    assert EmbeddingRequest.model_json_schema()["additionalProperties"] is False
