"""One request never takes the model down: what one request can make fail is refused before admission, or fails
that request alone, while other streams run on and /health stays 200.

The grammar compiler used to run first inside the engine's step: a `response_format` it refused threw out of the
step, the engine process died, every stream in flight got 503, and /health was 503 until the model had reloaded.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import llm_microservice

from .test_resilience import open_streams

BAD_SCHEMAS = [
    {"type": "nonsense"},
    {"type": "integer", "minimum": 5, "maximum": 2},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "[a-z"}}},
    {"type": "array", "items": {"$ref": "#/definitions/missing"}},
    {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},  # compiles, matches nothing: random tokens
]


def schema_body(model: str, schema: dict, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "Give me JSON."}], "max_tokens": 8,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}, **extra}


class HealthWatch:
    """Polls /health every 20 ms until stopped; every status it saw. A reload after an engine's death keeps /health
    503 for seconds, so the pause misses none; polling without one took a core from the streams under test."""

    def __init__(self, url: str):
        self.url, self.statuses, self._stop = url, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while True:  # at least one poll, however soon stop() comes
                self.statuses.append(client.get(self.url + "/health").status_code)
                if self._stop.wait(0.02):
                    return

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(60)
        return self.statuses


def finish_reasons(stream) -> list[str]:
    reasons = []
    for line in stream.lines:
        if line.startswith("data: {"):
            event = json.loads(line[len("data: "):])
            assert "error" not in event, line
            for choice in event.get("choices", []):
                if choice.get("finish_reason"):
                    reasons.append(choice["finish_reason"])
    return reasons


@contextlib.contextmanager
def streams_in_flight_survive(backend, model: str) -> Iterator[None]:
    """Three streams generating and /health polled around the block: the streams finish by length, every poll is
    200, and the engine did not restart."""
    restarts = metric(backend.url, "ovgenai:engine_restarts_total")
    streams = open_streams(backend.url, model, 3, max_tokens=48)
    watch = HealthWatch(backend.url)
    try:
        yield
        assert [finish_reasons(stream) for stream in streams] == [["length"]] * 3
    finally:
        for stream in streams:
            stream.close()
        statuses = watch.stop()
    assert statuses and set(statuses) == {200}
    assert metric(backend.url, "ovgenai:engine_restarts_total") == restarts
    assert backend.healthy()


@pytest.mark.parametrize("schema", BAD_SCHEMAS, ids=["unknown-type", "min-over-max", "bad-pattern", "dangling-ref",
                                                   "matches-nothing"])
def test_a_grammar_the_compiler_refuses_is_a_400_and_the_streams_in_flight_finish(backend, default_model, schema):
    with streams_in_flight_survive(backend, default_model):
        refused = httpx.post(backend.url + "/v1/chat/completions", json=schema_body(default_model, schema), timeout=60)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["param"] == "response_format" and error["type"] == "invalid_request_error"
        assert ".cc" not in error["message"] and "/home" not in error["message"], error["message"]


BAD_CONSTRAINTS = {
    "regex-does-not-parse": ({"structured_outputs": {"regex": "(unbalanced"}}, "structured_outputs.regex"),
    "regex-lookahead": ({"guided_regex": "(?=a)b"}, "guided_regex"),
    "empty-choice-list": ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
    "schema-text-nested-too-deep": ({"structured_outputs": {"json": "[" * 5000 + "]" * 5000}},
                                    "structured_outputs.json"),
    "ebnf-without-root": ({"structured_outputs": {"grammar": 'answer ::= "yes"'}}, "structured_outputs.grammar"),
    "ebnf-unclosed-string": ({"guided_grammar": 'root ::= "a" | "b'}, "guided_grammar"),
    "ebnf-undefined-rule": ({"guided_grammar": "root ::= missing"}, "guided_grammar"),
    "two-constraints": ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs.choice"),
    "with-response-format": ({"response_format": {"type": "json_object"}, "guided_regex": "a"}, "guided_regex"),
}


@pytest.mark.parametrize(("constraint", "param"), BAD_CONSTRAINTS.values(), ids=BAD_CONSTRAINTS.keys())
def test_a_constraint_that_cannot_run_is_a_400_naming_its_field_and_the_streams_in_flight_finish(
    backend, default_model, constraint, param
):
    with streams_in_flight_survive(backend, default_model):
        for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "Answer."}]}),
                           ("/v1/completions", {"prompt": "Answer:"})):
            for stream in (False, True):
                content = json.dumps({"model": default_model, "max_tokens": 8, "stream": stream, **body, **constraint})
                refused = httpx.post(backend.url + path, timeout=60, content=content,
                                     headers={"Content-Type": "application/json"})
                assert refused.status_code == 400, refused.text
                error = refused.json()["error"]
                assert (error["param"], error["type"]) == (param, "invalid_request_error"), error
                assert ".cc" not in error["message"] and "/home" not in error["message"], error["message"]


def test_the_same_refusal_through_the_llm_microservice(backend, default_model):
    """:9000 forwards bodies as they are: the backend's 400 comes back through it, and the model stays up."""
    restarts = metric(backend.url, "ovgenai:engine_restarts_total")
    with llm_microservice(backend.url, default_model) as llm:
        for stream in (False, True):
            body = schema_body(default_model, {"type": "nonsense"}, stream=stream)
            refused = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["param"] == "response_format"
    assert metric(backend.url, "ovgenai:engine_restarts_total") == restarts
    ok = httpx.post(backend.url + "/v1/chat/completions", timeout=60,
                    json=schema_body(default_model, {"type": "object"}))
    assert ok.status_code == 200, ok.text


def test_beam_search_with_a_stop_string_is_refused_before_it_reaches_the_engine(backend, default_model):
    """openvino_genai's beam search throws inside the step when a stop string matches (found by stepping the
    pipeline with each request shape beside others): refused at validation, the engine never sees it."""
    restarts = metric(backend.url, "ovgenai:engine_restarts_total")
    body = {"model": default_model, "prompt": "The quick brown fox jumps over the lazy dog. The quick brown",
            "max_tokens": 16, "best_of": 2, "n": 2, "stop": ["the", "The", " "]}
    refused = httpx.post(backend.url + "/v1/completions", json=body, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "stop", refused.text
    assert metric(backend.url, "ovgenai:engine_restarts_total") == restarts
    assert backend.healthy()
