"""Usage in responses and the token/success counters agree on every path: unary and streamed, chat and
completions, n > 1, several prompts in one request."""

from __future__ import annotations

import json

import httpx
import pytest

from .helpers import metric

COUNTERS = ("ovgenai:prompt_tokens_total", "ovgenai:generation_tokens_total", "ovgenai:request_success_total")
CHAT = {"messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 6}
COMPLETION = {"prompt": "Once upon a time", "max_tokens": 5}


def counters(backend) -> dict[str, float]:
    return {name: metric(backend.url, name) for name in COUNTERS}


def usage_of(response: httpx.Response, stream: bool) -> dict:
    if not stream:
        return response.json()["usage"]
    events = [json.loads(line[6:]) for line in response.text.split("\n") if line.startswith("data: {")]
    return events[-1]["usage"]


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
