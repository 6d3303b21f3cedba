"""A model served with prompt lookup decoding (OVMS's plugin_config {"prompt_lookup": true}) on the real engine.

openvino_genai refuses a request to such a pipeline unless it carries num_assistant_tokens and max_ngram_size, so a
request that omits them and succeeds shows the server filled in OVMS's defaults."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.ovgenai_server.system.helpers import metric, stream_errors
from tests.support.servers import MODELS, RemoteServer, wait_until

CONTEXT = ("The lighthouse of Varnholm was painted teal in 1931. The river Quillon flows into Lake Dravo. "
           "The Brassmoor railway has exactly 17 stations.")


@pytest.fixture(scope="module")
def lookup_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    args = ["--model", str(MODELS), "--plugin_config", '{"prompt_lookup": true}']
    with RemoteServer("ovgenai_server", args) as server:
        yield server


def ask(url: str, model: str, **fields) -> httpx.Response:
    messages = [{"role": "system", "content": f"Answer from the context.\n\nContext:\n{CONTEXT}"},
                {"role": "user", "content": "Into which lake does the river Quillon flow?"}]
    return httpx.post(f"{url}/v1/chat/completions", timeout=120,
                      json={"model": model, "messages": messages, "max_tokens": 24, **fields})


@pytest.mark.parametrize("fields", [{"temperature": 0}, {"temperature": 0, "num_assistant_tokens": 3,
                                                         "max_ngram_size": 2}, {"seed": 7}])
def test_answers_with_and_without_the_parameters(lookup_backend, default_model, fields):
    reply = ask(lookup_backend.url, default_model, **fields)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert choice["message"]["content"] and choice["finish_reason"] in ("stop", "length")


def test_streams_and_refuses_what_it_cannot_decode(lookup_backend, default_model):
    reply = ask(lookup_backend.url, default_model, temperature=0, stream=True)
    assert reply.status_code == 200 and reply.text.rstrip().endswith("data: [DONE]") and not stream_errors(reply.text)
    refused = ask(lookup_backend.url, default_model, best_of=2)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "best_of"
    assert "prompt_lookup" in refused.json()["error"]["message"]  # names the setting that rules it out


def test_several_choices_are_served_unary_and_streamed(lookup_backend, default_model):
    """openvino_genai's prompt lookup decodes one sequence per request: n choices are n requests of one, each
    sampled with its own seed (seed + i)."""
    first = ask(lookup_backend.url, default_model, n=3, temperature=1.0, seed=11).json()
    choices = sorted(first["choices"], key=lambda choice: choice["index"])
    assert [choice["index"] for choice in choices] == [0, 1, 2]
    assert all(choice["message"]["content"] for choice in choices)
    assert len({choice["message"]["content"] for choice in choices}) > 1  # not one sample three times
    assert 3 <= first["usage"]["completion_tokens"] <= 3 * 24  # every choice counted, each within max_tokens
    streamed: dict[int, str] = {}
    finished: dict[int, str] = {}
    reply = ask(lookup_backend.url, default_model, n=3, temperature=1.0, stream=True)
    for line in reply.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                streamed[choice["index"]] = streamed.get(choice["index"], "") + (choice["delta"].get("content") or "")
                if choice["finish_reason"]:
                    finished[choice["index"]] = choice["finish_reason"]
    assert sorted(streamed) == sorted(finished) == [0, 1, 2] and all(streamed.values())


def test_a_disconnect_stops_every_choices_request(lookup_backend, default_model):
    """The n requests behind one stream of n choices are all aborted when its client goes away (each could run for
    minutes here: 3000 tokens, the end token ignored)."""
    url = lookup_backend.url
    body = {"model": default_model, "messages": [{"role": "user", "content": "Tell me a very long story."}],
            "n": 3, "temperature": 1.0, "max_tokens": 3000, "ignore_eos": True, "stream": True}
    seen: list[tuple[float, float]] = []

    def in_engine() -> float:
        seen.append((metric(url, "ovgenai:num_requests_running"), metric(url, "ovgenai:num_requests_waiting")))
        return sum(seen[-1])

    with httpx.Client(timeout=60) as client, client.stream("POST", url + "/v1/chat/completions", json=body) as reply:
        # Keep the line iterator: once it is collected, httpx closes the connection, which is a disconnect.
        lines = reply.iter_lines()
        next(lines)
        try:
            wait_until(lambda: in_engine() == 3, 60, message="3 requests in the engine")
        except TimeoutError as error:  # say what the engine held, and what the server logged
            raise AssertionError(f"(running, waiting) seen: {seen[:5]} ... {seen[-5:]}\n"
                                 f"{lookup_backend.logs()[-4000:]}") from error
    wait_until(lambda: in_engine() == 0, 10, message="every request aborted")
