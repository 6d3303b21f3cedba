"""Speculative decoding with a draft model on the real backend: the default model drafting for itself (every draft
token accepted, so several come per step: a stream's chunks carry several tokens), the same greedy text as the model
alone where its choices are clear, and what the engine cannot combine with it refused with the reason. What a faster
draft gains on one stream is measured by bench/draft_model.py (bench/results.md)."""

from __future__ import annotations

import httpx
import pytest

from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir
from tests.support.replies import stream_events
from tests.support.servers import MODELS, RemoteServer

COUNT = "1, 2, 3, 4, 5, 6, 7,"  # a continuation without near ties: the verified tokens cannot round another way


@pytest.fixture(scope="module")
def drafted(default_model):
    folder = str(MODELS / default_model)
    with RemoteServer("ovgenai_server", ["--model", folder, "--draft_model", folder,
                                         "--num_speculative_tokens", "4"]) as server:
        yield server


def complete(url: str, **fields) -> httpx.Response:
    return httpx.post(url + "/v1/completions", json={"prompt": COUNT, "max_tokens": 12, "temperature": 0, **fields},
                      timeout=120)


def test_the_same_greedy_text_as_the_model_alone(drafted, backend):
    alone = complete(backend.url).json()["choices"][0]["text"]
    assert complete(drafted.url).json()["choices"][0]["text"] == alone


def test_several_tokens_come_per_step(drafted):
    reply = complete(drafted.url, stream=True, max_tokens=24, ignore_eos=True,
                     stream_options={"include_usage": True})
    events = stream_events(reply.text)
    chunks = [e for e in events if e["choices"] and e["choices"][0]["text"]]
    assert events[-1]["usage"]["completion_tokens"] == 24 and len(chunks) < 24


def test_sampled_choices_grammars_and_stops_are_served_and_beam_search_refused(drafted):
    chat = {"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 20}
    for fields in ({"n": 2, "temperature": 0.8}, {"response_format": {"type": "json_object"}}, {"stop": [","]},
                   {"num_assistant_tokens": 2}):
        reply = httpx.post(drafted.url + "/v1/chat/completions", json={**chat, **fields}, timeout=120)
        assert reply.status_code == 200, (fields, reply.text)
    refused = httpx.post(drafted.url + "/v1/chat/completions", json={**chat, "best_of": 2}, timeout=30)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "best_of"


def test_a_gguf_draft_is_served(backend, default_model, tmp_path):
    """The draft as the .gguf file it was published as (openvino-genai reads a draft from IR only: converted at
    start, cached under --cache_dir)."""
    gguf = package_dir(LLM_PACKAGE) / LLM_FILE
    with RemoteServer("ovgenai_server", ["--model", str(MODELS / default_model), "--draft_model", str(gguf),
                                         "--num_speculative_tokens", "3", "--cache_dir", str(tmp_path)]) as server:
        assert complete(server.url).json()["choices"][0]["text"] == complete(backend.url).json()["choices"][0]["text"]
    assert list((tmp_path / "gguf-ir").glob("*/openvino_model.xml"))
