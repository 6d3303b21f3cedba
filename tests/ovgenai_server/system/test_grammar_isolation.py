"""Grammars never stall the engine's step, never wait on each other's time, and are kept within a bound: a stream
keeps its pace while another request's grammar compiles; a quick grammar behind slow ones is not refused for their
time; a full compiler queue is a 429 with Retry-After; distinct grammars do not grow the engine past its cache; a
schema past its bounds is refused before the engine sees it."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import httpx
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, RemoteServer, child_pids, wait_until

CACHE = 4


def slow_regex(seed: int, classes: int = 8000) -> str:
    """A regex of many character classes: seconds to compile, one of a kind per seed."""
    return "".join(f"[a-{chr(ord('b') + (i + seed) % 20)}]" for i in range(classes))


def schema(seed: int) -> str:
    """An object of many patterned properties: compiled in a fraction of a second, kept in about a megabyte."""
    import json

    props = {f"p{seed}_{k}": {"type": "string", "pattern": f"[a-z]{{{k % 7 + 1}}}[0-9]+"} for k in range(120)}
    return json.dumps({"type": "object", "properties": props, "required": list(props)})


ONE_PROPERTY = '{"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}'


def constrained(url: str, model: str, field: str, value: str, timeout: float = 120) -> httpx.Response:
    return httpx.post(url + "/v1/completions", json={"model": model, "prompt": "x", "max_tokens": 2, field: value},
                      timeout=timeout)


@pytest.fixture(scope="module")
def grammar_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    # A small KV cache: its pages are touched as its blocks are first used, which the memory test must see done.
    args = ["--model", str(MODELS), "--grammar_compile_timeout", "8", "--grammar_cache_size", str(CACHE),
            "--cache_size", "0.01"]
    with RemoteServer("ovgenai_server", args) as server:
        yield server


def test_a_stream_keeps_its_pace_while_another_requests_grammar_compiles(backend, default_model):
    arrivals: list[float] = []

    def stream() -> None:
        body = {"model": default_model, "prompt": "Once upon a time", "max_tokens": 160, "ignore_eos": True,
                "stream": True, "temperature": 0}
        with httpx.stream("POST", backend.url + "/v1/completions", json=body, timeout=120) as reply:
            arrivals.extend(time.perf_counter() for line in reply.iter_lines() if line.startswith("data: {"))

    streaming = threading.Thread(target=stream)
    streaming.start()
    wait_until(lambda: len(arrivals) >= 20, 60, interval=0.01, message="the stream at its pace")
    started = time.perf_counter()
    reply = constrained(backend.url, default_model, "guided_regex", slow_regex(int(started * 1000) % 997))
    ended = time.perf_counter()
    streaming.join()
    assert reply.status_code in (200, 400), reply.text  # compiled, or refused as too slow: never a stall
    # Compiled in the step, this grammar stalled the stream for the whole compile (a gap of about a second, 40 to 100
    # times the stream's usual one): now the stream's chunks keep coming in every quarter of the compile, or of its
    # part before the stream ended.
    span_end = min(ended, arrivals[-1])
    quarters = [started + k * (span_end - started) / 4 for k in range(5)]
    empty = [k for k in range(4) if not any(quarters[k] <= at <= quarters[k + 1] for at in arrivals)]
    meanwhile = sum(started <= at <= ended for at in arrivals)
    print(f"compiled in {ended - started:.2f} s, {meanwhile} chunks meanwhile")  # noqa: T201 - for `pytest -s`
    assert span_end > started and not empty, (empty, ended - started, len(arrivals))


def test_a_quick_grammar_behind_slow_ones_is_not_refused_for_their_time(grammar_backend, default_model):
    url = grammar_backend.url
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        slow = [pool.submit(constrained, url, default_model, "guided_regex", slow_regex(seed, 12000))
                for seed in (1, 2)]
        wait_until(lambda: metric(url, "ovgenai:grammar_checks_pending") >= 2, 60, interval=0.01,
                   message="the slow grammars waiting for the compiler")  # they ask first
        quick = pool.submit(constrained, url, default_model, "guided_json", ONE_PROPERTY).result()
        assert quick.status_code == 200, quick.text
        quick = pool.submit(constrained, url, default_model, "guided_json", schema(0)).result()  # the large lane
        assert quick.status_code == 200, quick.text
        assert all(reply.result().status_code in (200, 400) for reply in slow)


def test_a_full_compiler_queue_is_429_with_retry_after_never_400(grammar_backend, default_model):
    url = grammar_backend.url
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        replies = list(pool.map(lambda seed: constrained(url, default_model, "guided_regex",
                                                         slow_regex(100 + seed, 6000)), range(12)))
    busy = [reply for reply in replies if reply.status_code == 429]
    assert busy and all(int(reply.headers["retry-after"]) >= 1 for reply in busy)
    assert all(reply.status_code in (200, 400, 429) for reply in replies)
    assert all("compile" in reply.json()["error"]["message"] for reply in replies if reply.status_code == 400)


def test_distinct_grammars_do_not_grow_the_engine_past_its_cache(grammar_backend, default_model):
    import psutil  # a dev tool: the unit tier collects this module without it

    engine = max((psutil.Process(pid) for pid in child_pids(grammar_backend.process.pid)),
                 key=lambda process: process.memory_info().rss)

    for seed in range(150):  # every block of the KV cache used once: their pages are in memory from here on
        httpx.post(grammar_backend.url + "/v1/completions", timeout=60,
                   json={"model": default_model, "prompt": f"x {seed}", "max_tokens": 2}).raise_for_status()

    def run(seeds: range) -> int:
        for seed in seeds:
            reply = constrained(grammar_backend.url, default_model, "guided_json", schema(1000 + seed))
            assert reply.status_code == 200, reply.text
        return engine.memory_info().rss

    warm = run(range(3 * CACHE))  # the cache filled and emptied a few times
    after = run(range(3 * CACHE, 15 * CACHE))
    # Kept, 48 more of these grammars take ~40 MB; within the cache the engine stays where it was.
    assert after - warm < 6 * 2**20, (warm >> 20, after >> 20)


@pytest.mark.parametrize(
    ("body", "param", "limit"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"name": {"type": "string", "maxLength": 300}}}}}],
          "tool_choice": "required"}, "tools", "maxLength of 300"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": {
            "type": "object", "properties": {"k": {"type": "array", "items": {"type": "array", "items": {
                "type": "array", "items": {"type": "array", "items": {"type": "array", "items": {"type": "array",
                    "items": {"type": "array", "items": {"type": "array", "items": {"type": "array", "items": {
                        "type": "array", "items": {"type": "integer"}}}}}}}}}}}}}}}}, "response_format", "levels deep"),
    ],
)
def test_a_schema_past_its_bounds_is_refused_before_the_engine_sees_it(backend, default_model, body, param, limit):
    reply = httpx.post(backend.url + "/v1/chat/completions", timeout=60, json={
        "model": default_model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **body})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and limit in error["message"], error
