"""The embedding service's body gate, on the real model: a lone surrogate reaches no tokenizer, whatever the body's
encoding or Content-Type headers (ovgenai_common/body.py)."""

from __future__ import annotations

import json

import httpx
import pytest

BODIES = {"/v1/embeddings": {"input": ["hi \ud800"]}, "/embed": {"inputs": "hi \ud800"},
          "/v1/rerank": {"query": "q", "documents": ["hi \ud800"]}}


def post(service, path: str, content: bytes, headers) -> dict:
    reply = httpx.post(service.url + path, content=content, headers=headers, timeout=60)
    assert reply.status_code == 400, (path, reply.status_code, reply.text)
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("path", ["/v1/embeddings", "/embed"])
def test_json_in_utf16_is_400_not_500(embedding_service, path):
    """Python's parser read UTF-16 and handed the tokenizer a lone surrogate: a 500."""
    error = post(embedding_service, path, json.dumps(BODIES[path]).encode("utf-16"),
                 {"Content-Type": "application/json"})
    assert error["code"] == "json_not_utf8"


@pytest.mark.parametrize("path", list(BODIES))
def test_two_content_types_and_lone_surrogates_are_400(embedding_service, path):
    content = json.dumps(BODIES[path]).encode()
    error = post(embedding_service, path, content, [("Content-Type", "application/json"),
                                                    ("Content-Type", "text/plain")])
    assert error["code"] == "content_type_repeated"
    error = post(embedding_service, path, content, {"Content-Type": "application/json"})
    assert error["code"] == "invalid_json" and error["param"] in ("input.0", "inputs", "documents.0")
