"""Disconnects, a killed engine process, KV-cache exhaustion, SIGTERM drain, API key, limits and several models."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading

import httpx
import openai
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, ROOT, RemoteServer, child_pids, wait_until

STORY = [{"role": "user", "content": "Tell me a very long story about a dragon."}]


class Stream:
    """A streaming chat request left open; `first_line()` waits until the server has started answering."""

    def __init__(self, url: str, model: str, max_tokens: int = 400):
        self.client = httpx.Client(timeout=60)
        body = {"model": model, "messages": STORY, "max_tokens": max_tokens, "stream": True, "ignore_eos": True}
        request = self.client.build_request("POST", url + "/v1/chat/completions", json=body)
        self.response = self.client.send(request, stream=True)
        # Keep one line iterator: a dropped httpx iterator closes the response.
        self.lines = self.response.iter_lines()

    def first_line(self) -> str:
        return next(self.lines)

    def close(self) -> None:
        self.response.close()
        self.client.close()


def open_streams(url: str, model: str, count: int, max_tokens: int = 400) -> list[Stream]:
    streams = [Stream(url, model, max_tokens) for _ in range(count)]
    for stream in streams:
        stream.first_line()
    return streams


def test_disconnected_streams_are_cancelled(backend, default_model):
    streams = open_streams(backend.url, default_model, 20)
    wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") == 20, 30, message="20 running streams")
    for stream in streams:
        stream.close()
    wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") == 0, 10, message="aborted streams")
    response = httpx.post(
        backend.url + "/v1/chat/completions",
        json={"model": default_model, "messages": STORY, "max_tokens": 5}, timeout=60,
    )
    assert response.status_code == 200


def test_health_answers_while_streams_generate(backend, default_model):
    streams = open_streams(backend.url, default_model, 32, 200)
    try:
        statuses = [httpx.get(backend.url + "/health", timeout=5).status_code for _ in range(20)]
        assert statuses == [200] * 20
    finally:
        for stream in streams:
            stream.close()


def test_metrics_exported(backend, default_model):
    text = httpx.get(backend.url + "/metrics").text
    for name in ("ovgenai:num_requests_running", "ovgenai:num_requests_waiting", "ovgenai:kv_cache_usage_perc",
                 "ovgenai:prompt_tokens_total", "ovgenai:generation_tokens_total",
                 "ovgenai:time_to_first_token_seconds_bucket", "ovgenai:inter_token_latency_seconds_bucket",
                 "ovgenai:e2e_request_latency_seconds_bucket"):
        assert name in text
    assert metric(backend.url, "ovgenai:generation_tokens_total", default_model) > 0


@pytest.fixture()
def own_backend(default_model):  # noqa: ARG001 - depends on the model being prepared
    with RemoteServer("ovgenai_server", ["--model", str(MODELS)]) as server:
        yield server


def test_engine_killed_mid_stream_recovers(own_backend, default_model):
    def value(name: str) -> float:
        return metric(own_backend.url, f"ovgenai:{name}", default_model)

    assert (value("engine_available"), value("engine_restarts_total"), value("request_failure_total")) == (1, 0, 0)
    engine_pid = next(pid for pid in child_pids(own_backend.process.pid) if _is_engine(pid))
    stream = Stream(own_backend.url, default_model, 1000)
    stream.first_line()
    os.kill(engine_pid, signal.SIGKILL)
    rest = [line for line in stream.lines if line]
    stream.close()
    assert rest[-1] == "data: [DONE]"
    error = json.loads(rest[-2][len("data: "):])["error"]
    assert "engine" in error["message"].lower()
    assert own_backend.process.poll() is None
    wait_until(lambda: httpx.get(own_backend.url + "/health").status_code == 503, 10, message="503 while down")
    body = httpx.get(own_backend.url + "/health").json()
    assert body["error"]["type"] == "unavailable_error"
    # While the engine reloads: not available, one restart counted, the cut stream counted as a failure.
    assert (value("engine_available"), value("engine_restarts_total"), value("request_failure_total")) == (0, 1, 1)
    own_backend.wait_healthy(120)
    assert (value("engine_available"), value("engine_restarts_total")) == (1, 1)
    ok = httpx.post(own_backend.url + "/v1/chat/completions",
                    json={"model": default_model, "messages": STORY, "max_tokens": 5}, timeout=60)
    assert ok.status_code == 200


def test_engine_does_not_outlive_a_killed_api_process(own_backend, default_model):
    """SIGKILL leaves no chance to send Shutdown: the engine must notice on its own, even mid-generation (it used
    to step on until its output queue filled, then block on it forever)."""
    engine_pid = next(pid for pid in child_pids(own_backend.process.pid) if _is_engine(pid))
    stream = Stream(own_backend.url, default_model, 2000)
    stream.first_line()
    os.kill(own_backend.process.pid, signal.SIGKILL)
    stream.close()
    wait_until(lambda: not _alive(engine_pid), 10, message=f"engine process {engine_pid} to exit")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited (its reaper is gone)
    except OSError:
        return False


def _is_engine(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"spawn_main" in handle.read()
    except OSError:
        return False


def test_sigterm_drains_running_requests(own_backend, default_model):
    result = {}

    def run():
        response = httpx.post(
            own_backend.url + "/v1/chat/completions",
            json={"model": default_model, "messages": STORY, "max_tokens": 200, "ignore_eos": True}, timeout=120,
        )
        result["status"], result["body"] = response.status_code, response.json()

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: metric(own_backend.url, "ovgenai:num_requests_running") > 0, 10, message="running")
    own_backend.process.send_signal(signal.SIGTERM)
    thread.join(120)
    assert result["status"] == 200
    assert result["body"]["usage"]["completion_tokens"] == 200
    assert own_backend.process.wait(60) == 0


def test_shutdown_is_bounded_and_refuses_new_connections_while_draining(default_model):
    args = ["--model", str(MODELS), "--graceful_shutdown_seconds", "1"]
    with RemoteServer("ovgenai_server", args) as server:
        result = {}

        def run():
            try:
                response = httpx.post(server.url + "/v1/chat/completions", timeout=300, json={
                    "model": default_model, "messages": STORY, "max_tokens": 3000, "ignore_eos": True})
                result["tokens"] = response.json()["usage"]["completion_tokens"] if response.status_code == 200 \
                    else response.status_code
            except httpx.HTTPError as error:
                result["tokens"] = type(error).__name__

        thread = threading.Thread(target=run)
        thread.start()
        wait_until(lambda: metric(server.url, "ovgenai:num_requests_running") == 1, 30, message="running")
        server.process.send_signal(signal.SIGTERM)

        def refused() -> bool:
            # Refused: no connection, or (a connection the kernel queued just before the listener closed) closed
            # without an answer. An answer of any status is not a refusal: the wait goes on.
            try:
                httpx.get(server.url + "/live", timeout=2)
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
                return True
            return False

        wait_until(refused, 10, message="new connections to be refused")
        assert server.process.poll() is None  # still draining the running request meanwhile
        server.process.wait(120)
        thread.join(120)
    # The running request did not get its 3000 tokens: the drain was cut after one second.
    assert result["tokens"] != 3000, result


# 20 KV blocks of 32 tokens: 640 tokens in all (below 1 GB the cache is sized in blocks, 10,000 per GB).
KV_TOKENS = 640


@pytest.fixture(scope="module")
def small_cache_backend(default_model):  # noqa: ARG001 - depends on the model being prepared
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--cache_size", "0.002"]) as server:
        yield server


def words(count: int) -> str:
    """A prompt of `count` tokens for the default model (each " word" is one token)."""
    return "word" + " word" * (count - 1)


def test_kv_cache_exhaustion_is_survived(small_cache_backend, default_model):
    """Six requests that fit the cache one at a time but not together (6 x 214 tokens > 640) all finish: the
    scheduler makes them wait or preempts them, it does not fail them. One that can never fit is refused."""
    server = small_cache_backend
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=300)

    def one(_) -> tuple[str, int]:
        reply = client.completions.create(model=default_model, prompt=words(150), max_tokens=64, temperature=0,
                                          extra_body={"ignore_eos": True})
        assert reply.usage.prompt_tokens == 150
        return reply.choices[0].finish_reason, reply.usage.completion_tokens

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        assert list(pool.map(one, range(6))) == [("length", 64)] * 6
    with pytest.raises(openai.BadRequestError, match="KV cache"):
        client.completions.create(model=default_model, prompt=words(KV_TOKENS + 10), max_tokens=4)
    assert server.healthy()
    assert metric(server.url, "ovgenai:num_requests_running") == 0
    assert metric(server.url, "ovgenai:engine_restarts_total") == 0


def test_a_non_streaming_request_whose_client_leaves_is_aborted_and_its_kv_cache_freed(small_cache_backend,
                                                                                          default_model):
    server = small_cache_backend

    def value(name: str) -> float:
        return metric(server.url, f"ovgenai:{name}")

    wait_until(lambda: value("num_requests_running") == 0 == value("num_requests_waiting"), 30, message="idle")
    assert value("kv_cache_usage_perc") == 0
    successes, generated = value("request_success_total"), value("generation_tokens_total")
    # 40 + 590 tokens: nearly the whole cache, and many seconds of generation if it were not aborted.
    body = json.dumps({"model": default_model, "prompt": words(40), "max_tokens": 590, "ignore_eos": True})
    with socket.create_connection(("127.0.0.1", server.port)) as connection:
        connection.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
        wait_until(lambda: value("num_requests_running") == 1 and value("kv_cache_usage_perc") > 0, 30,
                   message="the request to run")
    # The client has closed its connection without reading an answer: the generation stops, its blocks are
    # released at once (far sooner than the rest of its 590 tokens would take).
    wait_until(lambda: value("num_requests_running") == 0 == value("num_requests_waiting"), 5,
               message="the generation to be aborted")
    wait_until(lambda: value("kv_cache_usage_perc") == 0, 5, message="its KV blocks to be released")
    assert value("request_success_total") == successes and value("generation_tokens_total") == generated
    # Its blocks were released: a request that needs nearly the whole cache fits again.
    reply = httpx.post(server.url + "/v1/completions", timeout=120, json={
        "model": default_model, "prompt": words(KV_TOKENS - 40), "max_tokens": 8, "ignore_eos": True})
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] == 8


def test_api_key_protects_every_route_but_the_probes(default_model):
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--api_key", "sekrit"]) as server:
        for path in ("/v1/models", "/v3/models"):
            denied = httpx.get(server.url + path)
            assert denied.status_code == 401 and denied.json()["error"]["type"] == "authentication_error"
            assert httpx.get(server.url + path, headers={"Authorization": "Bearer sekrit"}).status_code == 200
        assert httpx.get(server.url + "/health").status_code == 200
        assert httpx.get(server.url + "/live").status_code == 200
        for path in ("/metrics", "/v1/config", "/openapi.json"):  # Prometheus sends the key as a bearer token
            assert httpx.get(server.url + path).status_code == 401, path
            assert httpx.get(server.url + path, headers={"Authorization": "Bearer sekrit"}).status_code == 200, path
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sekrit", max_retries=0)
        assert client.chat.completions.create(model=default_model, messages=STORY, max_tokens=2).choices


def test_queue_limit_answers_429(default_model):
    args = ["--model", str(MODELS), "--max_num_seqs", "2", "--max_waiting_requests", "0"]
    with RemoteServer("ovgenai_server", args) as server:
        streams = open_streams(server.url, default_model, 2, 300)
        try:
            refused = httpx.post(server.url + "/v1/chat/completions",
                                 json={"model": default_model, "messages": STORY, "max_tokens": 2}, timeout=30)
            assert refused.status_code == 429
            assert refused.json()["error"]["type"] == "rate_limit_error"
        finally:
            for stream in streams:
                stream.close()


def test_repository_serves_several_models_with_graph_options(default_model, tmp_path):
    source = MODELS / default_model
    for name, options in (("alpha", 'max_num_seqs: 8\n          cache_size: 1'), ("beta", "best_of_limit: 3")):
        folder = tmp_path / name / "ir"
        folder.mkdir(parents=True)
        for item in source.glob("openvino_*"):
            os.link(item, folder / item.name) if _same_fs(item, tmp_path) else shutil.copy(item, folder)
        graph = (source / "graph.pbtxt").read_text()
        assert 'models_path: "./"' in graph
        graph = graph.replace('models_path: "./"', f'models_path: "./ir"\n          {options}')
        (folder.parent / "graph.pbtxt").write_text(graph)
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_config_list": [], "mediapipe_config_list": [{"name": "alpha"}, {"name": "beta", "base_path": "beta"}]}
    ))
    with RemoteServer("ovgenai_server", ["--model", str(tmp_path / "config.json")]) as server:
        client = openai.OpenAI(base_url=server.url + "/v3", api_key="x", max_retries=0)
        assert sorted(m.id for m in client.models.list().data) == ["alpha", "beta"]
        for name in ("alpha", "beta"):
            reply = client.chat.completions.create(model=name, messages=STORY, max_tokens=3)
            assert reply.model == name
        with pytest.raises(openai.BadRequestError):  # beta's graph.pbtxt limits best_of to 3
            client.completions.create(model="beta", prompt="x", best_of=4, max_tokens=2)


def _same_fs(a, b) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


@pytest.mark.usefixtures("default_model")
def test_missing_device_is_a_clear_startup_error():
    result = subprocess.run(
        [sys.executable, "-m", "ovgenai_server", "--model", str(MODELS), "--device", "GPU.1"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "GPU.1" in result.stderr and "CPU" in result.stderr


@pytest.mark.usefixtures("default_model")
def test_model_that_cannot_load_stops_the_server_with_the_reason():
    not_an_llm = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
    result = subprocess.run(
        [sys.executable, "-m", "ovgenai_server", "--model", str(not_an_llm), "--port", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 3
    assert "could not load" in result.stderr and "stateful" in result.stderr
