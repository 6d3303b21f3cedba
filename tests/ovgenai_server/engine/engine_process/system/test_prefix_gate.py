"""Requests that share a long prompt prefix, arriving together, on the real engine with prefix caching on: the
followers wait for the first one's prompt to be computed (`ovgenai:prefix_cache_waits_total`), then all finish."""

from __future__ import annotations

import concurrent.futures

import httpx

from tests.ovgenai_server.system.helpers import metric, stream_errors

# ~1,100 tokens: the first request's prompt takes several engine steps, so the others arrive while it is computed.
SYSTEM = " ".join(f"Rule {i}: answer briefly, cite the handbook, and never guess." for i in range(100))


def chat(url: str, model: str, question: str, stream: bool) -> httpx.Response:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    return httpx.post(url + "/v1/chat/completions", timeout=300,
                      json={"model": model, "messages": messages, "max_tokens": 8, "temperature": 0,
                            "stream": stream})


def test_requests_sharing_a_long_prefix_wait_for_it_and_all_finish(backend, default_model):
    before = metric(backend.url, "ovgenai:prefix_cache_waits_total", default_model)
    questions = [f"What does rule {i} say?" for i in range(6)]
    with concurrent.futures.ThreadPoolExecutor(len(questions)) as pool:
        replies = list(pool.map(lambda q: chat(backend.url, default_model, q[1], q[0] % 2 == 0),
                                enumerate(questions)))
    for index, reply in enumerate(replies):
        assert reply.status_code == 200, reply.text
        if index % 2 == 0:  # streamed
            lines = [line for line in reply.text.splitlines() if line]
            assert lines[-1] == "data: [DONE]" and '"finish_reason":null' in reply.text
            assert not stream_errors(reply.text)
        else:
            assert reply.json()["choices"][0]["finish_reason"] in ("stop", "length")
            assert reply.json()["usage"]["prompt_tokens"] > 1000
    assert metric(backend.url, "ovgenai:prefix_cache_waits_total", default_model) > before
    assert metric(backend.url, "ovgenai:num_requests_waiting", default_model) == 0
    assert metric(backend.url, "ovgenai:num_requests_running", default_model) == 0


def test_a_held_request_whose_client_leaves_is_dropped(backend, default_model):
    streams = []
    client = httpx.Client(timeout=300)
    try:
        for i in range(4):
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Question {i}?"}]
            request = client.build_request("POST", backend.url + "/v1/chat/completions", json={
                "model": default_model, "messages": messages, "max_tokens": 64, "ignore_eos": True, "stream": True})
            streams.append(client.send(request, stream=True))
        streams.pop().close()  # the last one leaves at once: most likely still held behind the first
        for stream in streams:
            lines = [line for line in stream.iter_lines() if line]
            assert lines[-1] == "data: [DONE]" and '"finish_reason":"length"' in lines[-2]
    finally:
        for stream in streams:
            stream.close()
        client.close()
    assert metric(backend.url, "ovgenai:num_requests_waiting", default_model) == 0
