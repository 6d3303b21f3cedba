"""The TorchServe front's /predictions behind the shared body gate, on the real engine: its JSON bodies are JSON as
RFC 8259 has it (UTF-8, no unpaired surrogate), from the one Content-Type the framework reads."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.replies import refused

from .test_torchserve import NAME, TorchServe

BODY = json.dumps({"text": "hi \ud800", "max_new_tokens": 2})  # the escape, as a client's JSON spells it


@pytest.fixture(scope="module")
def torchserve(default_model):  # noqa: ARG001 - needs the default model prepared
    with TorchServe() as server:
        yield server


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_json_in_another_encoding_is_400(torchserve, encoding):
    """request.json() read UTF-16 and UTF-32 and handed the tokenizer a lone surrogate."""
    reply = httpx.post(f"{torchserve.url}/predictions/{NAME}", content=BODY.encode(encoding), timeout=60,
                       headers={"Content-Type": "application/json"})
    refused(reply, "json_not_utf8")


def test_two_content_types_and_a_lone_surrogate_are_400(torchserve):
    url = f"{torchserve.url}/predictions/{NAME}"
    two = [("Content-Type", "application/json"), ("Content-Type", "text/plain")]  # the gate read the last
    refused(httpx.post(url, content=BODY.encode(), headers=two, timeout=60), "content_type_repeated")
    reply = httpx.post(url, content=BODY.encode(), headers={"Content-Type": "application/json"}, timeout=60)
    refused(reply, "invalid_json")
    assert reply.json()["error"]["param"] == "text"
