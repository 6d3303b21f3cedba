"""The backend's body gate, on the real server and model: a lone surrogate reaches no tokenizer, whatever the
body's encoding or Content-Type headers (ovgenai_common/body.py)."""

from __future__ import annotations

import json

import httpx
import pytest

PATHS = ("/v1/completions", "/tokenize")


def body(model: str) -> str:
    return json.dumps({"model": model, "prompt": "hi \ud800", "max_tokens": 2})  # the escape, as a client spells it


def post(backend, path: str, content: bytes, headers) -> dict:
    reply = httpx.post(backend.url + path, content=content, headers=headers, timeout=60)
    assert reply.status_code == 400, (path, reply.status_code, reply.text)
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_json_in_another_encoding_is_400_not_500(backend, default_model, path, encoding):
    """Python's parser read UTF-16 and UTF-32 and handed the tokenizer a lone surrogate: a 500."""
    error = post(backend, path, body(default_model).encode(encoding), {"Content-Type": "application/json"})
    assert error["code"] == "json_not_utf8" and "UTF-8" in error["message"]


@pytest.mark.parametrize("path", PATHS)
def test_two_content_types_are_400(backend, default_model, path):
    """The gate read the last (text/plain: not checked), the framework the first (JSON: parsed)."""
    headers = [("Content-Type", "application/json"), ("Content-Type", "text/plain")]
    assert post(backend, path, body(default_model).encode(), headers)["code"] == "content_type_repeated"


@pytest.mark.parametrize("path", PATHS)
def test_a_lone_surrogate_is_refused_naming_its_field(backend, default_model, path):
    error = post(backend, path, body(default_model).encode(), {"Content-Type": "application/json; charset=utf-16"})
    assert error["code"] == "invalid_json" and error["param"] == "prompt" and "unpaired surrogate" in error["message"]
