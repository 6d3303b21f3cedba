"""Usage in responses and the token/success counters agree on every path: unary and streamed, chat and
completions, n > 1, several prompts in one request."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ovgenai_server.system.helpers import metric
from tests.support.replies import stream_events

COUNTERS = ("ovgenai:prompt_tokens_total", "ovgenai:generation_tokens_total", "ovgenai:request_success_total")
CHAT = {"messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 6}
COMPLETION = {"prompt": "Once upon a time", "max_tokens": 5}


def counters(backend) -> dict[str, float]:
    return {name: metric(backend.url, name) for name in COUNTERS}


def usage_of(response: httpx.Response, stream: bool) -> dict:
    if not stream:
        return response.json()["usage"]
    return stream_events(response.text)[-1]["usage"]


CASES = [
    ("/v1/chat/completions", CHAT, 1),
    ("/v1/chat/completions", {**CHAT, "n": 2, "temperature": 1.0}, 2),
    ("/v1/completions", COMPLETION, 1),
    ("/v1/completions", {**COMPLETION, "n": 2, "temperature": 1.0}, 2),
]


@pytest.mark.parametrize(
    ("path", "body", "choices", "stream"),
    [(*case, stream) for case in CASES for stream in (False, True)]
    # Several prompts in one request are unary only (a stream carries one prompt).
    + [("/v1/completions", {**COMPLETION, "prompt": ["One", "Two", "Three"]}, 3, False)],
)
def test_usage_and_counters_agree(backend, default_model, path, body, choices, stream):
    before = counters(backend)
    request = {**body, "model": default_model, "stream": stream}
    if stream:
        request["stream_options"] = {"include_usage": True}
    response = httpx.post(backend.url + path, json=request, timeout=120)
    assert response.status_code == 200, response.text
    usage = usage_of(response, stream)
    after = counters(backend)
    assert usage["completion_tokens"] > 0
    assert after["ovgenai:generation_tokens_total"] - before["ovgenai:generation_tokens_total"] == \
        usage["completion_tokens"]
    assert after["ovgenai:prompt_tokens_total"] - before["ovgenai:prompt_tokens_total"] == usage["prompt_tokens"]
    assert after["ovgenai:request_success_total"] - before["ovgenai:request_success_total"] == choices


def successes_by_reason(backend, model: str) -> Counter:
    text = httpx.get(backend.url + "/metrics", timeout=5).text
    return Counter({sample.labels["finished_reason"]: sample.value
                    for family in text_string_to_metric_families(text) for sample in family.samples
                    if sample.name == "ovgenai:request_success_total" and sample.labels["model_name"] == model})


def test_successes_are_counted_by_their_finish_reason(backend, default_model):
    def chat(**extra) -> str:
        body = {"model": default_model, "messages": CHAT["messages"], "temperature": 0, **extra}
        response = httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=120)
        assert response.status_code == 200, response.text
        return response.json()["choices"][0]

    words = chat(max_tokens=12)["message"]["content"].split()
    assert len(words) >= 3, words
    before = successes_by_reason(backend, default_model)
    cut = chat(max_tokens=2)
    stopped = chat(max_tokens=12, stop=[words[2]])  # stops at the third word of the same greedy answer
    assert (cut["finish_reason"], stopped["finish_reason"]) == ("length", "stop")
    after = successes_by_reason(backend, default_model)
    assert after - before == Counter({"length": 1, "stop": 1})


PHASES = ("ovgenai:request_queue_time_seconds", "ovgenai:request_prefill_time_seconds",
          "ovgenai:request_decode_time_seconds")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("ended", ["by the engine", "at a stop string"])
def test_each_request_is_timed_once_in_each_engine_phase(backend, default_model, stream, ended):
    """Queue, prefill and decode times (vLLM's histograms): one observation per request, each of some length, also
    for a request the API process ends at a stop string (the engine is not told them)."""
    def phases() -> dict[str, float]:
        return {f"{name}{part}": metric(backend.url, f"{name}{part}", default_model)
                for name in PHASES for part in ("_count", "_sum")}

    body = {**CHAT, "model": default_model, "stream": stream, "temperature": 0, "max_tokens": 8,
            "ignore_eos": True}
    if ended == "at a stop string":  # its third word: a decode of more than one token
        answer = httpx.post(backend.url + "/v1/chat/completions", json={**body, "stream": False}, timeout=120)
        words = answer.json()["choices"][0]["message"]["content"].split()
        assert len(words) >= 3, words
        body["stop"] = [words[2]]
    before = phases()
    response = httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    after = phases()
    for name in PHASES:
        assert after[f"{name}_count"] - before[f"{name}_count"] == 1, name
        assert after[f"{name}_sum"] - before[f"{name}_sum"] > 0, name
