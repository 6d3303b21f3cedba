"""The LLM microservice in front of the real backend (and of an independent OpenAI-compatible fake)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys

import httpx
import openai
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, ROOT, RemoteServer, free_port, wait_until

QUESTION = "What is Deep Learning?"


def microservice(endpoint: str, model: str | None, **env) -> RemoteServer:
    full_env = {"LLM_ENDPOINT": endpoint, **({"LLM_MODEL": model} if model else {}), **env}
    return RemoteServer("ovgenai_services.llm", env=full_env, health_path="/live")


@pytest.fixture(scope="module")
def llm(backend, default_model):
    with microservice(backend.url, default_model) as server:
        yield server


def sse_lines(response: httpx.Response) -> list[str]:
    return [line for line in response.text.split("\n") if line]


# --- the seed's curl commands -------------------------------------------------------------------------------


def test_seed_health_check(llm):
    response = httpx.get(llm.url + "/v1/health_check", headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    # byte for byte the output OPEA's guide shows
    assert response.content == (b'{"Service Title":"opea_service@llm_vllm/MicroService",'
                                b'"Service Description":"OPEA Microservice Infrastructure"}')


def test_seed_stream_mode_string_messages(llm, default_model):
    body = {"model": default_model, "messages": QUESTION, "max_tokens": 17}
    response = httpx.post(llm.url + "/v1/chat/completions", json=body, headers={"Accept": "*/*"}, timeout=60)
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = sse_lines(response)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and chunks[0]["choices"][0]["delta"]["content"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])


def test_seed_stream_mode_list_messages(llm, default_model):
    body = {"model": default_model, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 17}
    response = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
    assert sse_lines(response)[-1] == "data: [DONE]"


def test_seed_non_stream_mode(llm, default_model):
    body = {"model": default_model, "messages": QUESTION, "max_tokens": 17, "stream": False}
    response = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] <= 17


def test_seed_query_form_with_streaming_false(llm, default_model):
    """OPEA's guide's curl, typed as it types it: `query` and `streaming`."""
    body = {"query": "What is Deep Learning?", "max_tokens": 17, "top_k": 10, "top_p": 0.95, "typical_p": 0.95,
            "temperature": 0.01, "repetition_penalty": 1.03, "streaming": False}
    response = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["object"] == "text_completion" and answer["model"] == default_model
    assert answer["choices"][0]["text"] and answer["usage"]["completion_tokens"] <= 17


def test_seed_query_form_streamed(llm):
    # greedy: sampled at temperature 1, the model ends this completion at once about one time in eight
    body = {"query": "What is Deep Learning?", "max_tokens": 17, "streaming": True, "temperature": 0}
    response = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
    lines = sse_lines(response)
    assert lines[-1] == "data: [DONE]"
    assert "".join(json.loads(line[6:])["choices"][0]["text"] for line in lines[:-1] if '"choices":[{' in line)


# --- official clients ---------------------------------------------------------------------------------------


CAPITAL = "What is the capital of France?"


@pytest.fixture(scope="module")
def backend_answer(backend, default_model):
    """The backend's own greedy answer, asked directly: what the microservice must relay unchanged."""
    direct = openai.OpenAI(base_url=backend.url + "/v1", api_key="unused", max_retries=0)
    reply = direct.chat.completions.create(
        model=default_model, messages=[{"role": "user", "content": CAPITAL}], max_tokens=20, temperature=0
    )
    assert reply.choices[0].message.content
    return reply.choices[0].message.content


def test_openai_client_unary_and_stream(llm, default_model, backend_answer):
    client = openai.OpenAI(base_url=llm.url + "/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=default_model, messages=[{"role": "user", "content": CAPITAL}], max_tokens=20, temperature=0,
    )
    assert reply.choices[0].message.content == backend_answer
    chunks = list(client.chat.completions.create(
        model=default_model, messages=[{"role": "user", "content": CAPITAL}],
        max_tokens=20, temperature=0, stream=True, stream_options={"include_usage": True},
    ))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == backend_answer
    assert chunks[-1].usage.completion_tokens > 0


def test_model_defaults_to_llm_model(llm):
    response = httpx.post(llm.url + "/v1/chat/completions",
                          json={"messages": QUESTION, "max_tokens": 3, "stream": False}, timeout=60)
    assert response.status_code == 200


def test_langchain_chat_openai(llm, default_model, backend_answer):
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=llm.url + "/v1", api_key="unused", model=default_model, temperature=0, max_tokens=20)
    assert chat.invoke(CAPITAL).content == backend_answer
    assert "".join(c.content for c in chat.stream(CAPITAL)) == backend_answer


def test_backend_4xx_passed_through(llm):
    response = httpx.post(llm.url + "/v1/chat/completions",
                          json={"model": "nope", "messages": QUESTION, "stream": False}, timeout=60)
    assert response.status_code == 404
    assert "nope" in response.json()["error"]["message"]
    bad = httpx.post(llm.url + "/v1/chat/completions", content=b"{oops", timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"


def test_client_disconnect_aborts_backend_generation(llm, backend, default_model):
    body = {"model": default_model, "messages": QUESTION, "max_tokens": 500, "ignore_eos": True}
    with httpx.Client(timeout=60) as client, client.stream("POST", llm.url + "/v1/chat/completions", json=body) as r:
        lines = r.iter_lines()
        next(lines)
        wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") >= 1, 10, message="running")
    wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") == 0, 10, message="aborted upstream")


def test_a_unary_request_whose_client_leaves_is_aborted_in_the_backend(llm, backend, default_model):
    """Not only streams: a non-streamed request's client that closes its connection while the backend generates
    has the backend request closed too, and the backend aborts the generation instead of finishing it for nobody."""
    wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") == 0, 30, message="an idle backend")
    generated = metric(backend.url, "ovgenai:generation_tokens_total")
    body = json.dumps({"model": default_model, "messages": [{"role": "user", "content": "tell a long story"}],
                       "max_tokens": 3000, "ignore_eos": True, "stream": False})
    with socket.create_connection(("127.0.0.1", llm.port)) as connection:
        connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
        wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") == 1, 30, message="running")
    wait_until(lambda: metric(backend.url, "ovgenai:num_requests_running") == 0, 30, message="aborted upstream")
    # Aborted, not finished: far fewer than its 3000 tokens were generated.
    assert metric(backend.url, "ovgenai:generation_tokens_total") - generated < 3000


def _without_envelope(stream: bytes) -> tuple[bytes, int]:
    """The stream with each chunk's per-request id and creation time blanked (they differ between two requests)."""
    return re.subn(rb'"id":"chatcmpl-[0-9a-f]+","object":"chat\.completion\.chunk","created":[0-9]+', b"ENVELOPE",
                   stream)


def _streamed_text(response: httpx.Response) -> str:
    events = [json.loads(line[6:]) for line in sse_lines(response) if line.startswith("data: {")]
    return "".join(choice["delta"].get("content") or "" for event in events for choice in event["choices"])


def test_streams_are_relayed_byte_for_byte(llm, backend, default_model):
    """The same greedy request straight from the backend and through the LLM microservice. The backend merges the
    deltas of a step into the next chunk when its reader lags (a busy machine), so two requests may be cut into
    different chunks: a pair cut alike must be the same bytes; a pair cut differently is asked again."""
    body = {"model": default_model, "messages": [{"role": "user", "content": CAPITAL}], "max_tokens": 12,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    counts = []
    for _ in range(5):
        direct = httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=60)
        relayed = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
        assert relayed.headers["content-type"].startswith("text/event-stream")
        assert _streamed_text(relayed) == _streamed_text(direct) != ""
        direct_bytes, chunks = _without_envelope(direct.content)
        relayed_bytes, relayed_chunks = _without_envelope(relayed.content)
        if relayed_chunks == chunks:
            assert chunks > 2
            assert relayed_bytes == direct_bytes  # framing, key order, spacing, usage chunk and [DONE], all untouched
            return
        counts.append((chunks, relayed_chunks))
    pytest.fail(f"no pair of streams was cut into the same chunks (direct, relayed): {counts}")


def test_vllm_endpoint_alias_and_the_api_key(backend, default_model):
    """vLLM_ENDPOINT (OPEA's name) alone points the service at the backend; SERVICE_API_KEY guards every route but
    the probes."""
    env = {"vLLM_ENDPOINT": backend.url, "LLM_MODEL": default_model, "SERVICE_API_KEY": "llm-key"}
    assert "LLM_ENDPOINT" not in os.environ
    with RemoteServer("ovgenai_services.llm", env=env, health_path="/live") as llm:
        assert httpx.get(llm.url + "/v1/health_check").status_code == 200  # reached the backend it was given
        body = {"messages": QUESTION, "max_tokens": 3, "stream": False}
        denied = httpx.post(llm.url + "/v1/chat/completions", json=body, timeout=60)
        assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
        for path in ("/health", "/live"):
            assert httpx.get(llm.url + path).status_code == 200, path
        assert httpx.get(llm.url + "/metrics").status_code == 401
        assert httpx.get(llm.url + "/metrics", headers={"Authorization": "Bearer llm-key"}).status_code == 200
        client = openai.OpenAI(base_url=llm.url + "/v1", api_key="llm-key", max_retries=0)
        reply = client.chat.completions.create(model=default_model, messages=[{"role": "user", "content": CAPITAL}],
                                               max_tokens=3)
        assert reply.model == default_model and reply.usage.completion_tokens == 3


def test_connect_timeout_bounds_a_backend_that_never_accepts(default_model):
    """A backend that does not answer the connection at all (a host dropping packets) costs CONNECT_TIMEOUT, then
    503. Here a listening socket whose accept queue is full: the kernel drops further connection attempts."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            env = {"CONNECT_TIMEOUT": "0.2", "READ_TIMEOUT": "600"}
            with microservice(f"http://127.0.0.1:{port}", default_model, **env) as llm:
                # The default (5 s) would outlast this client's patience: only the setting answers in time.
                response = httpx.post(llm.url + "/v1/chat/completions", timeout=4,
                                      json={"messages": QUESTION, "stream": False})
        finally:
            for filler in fillers:
                filler.close()
    assert response.status_code == 503, response.text
    assert "ConnectTimeout" in response.json()["error"]["message"]


# --- health tells the truth; failures keep the stream contract ------------------------------------------------


def test_health_check_follows_the_backend(default_model):
    port = free_port()
    backend_args = ["--model", str(MODELS)]
    with RemoteServer("ovgenai_server", backend_args, port=port) as backend_server:
        with microservice(backend_server.url, default_model) as llm:
            assert httpx.get(llm.url + "/v1/health_check").status_code == 200
            backend_server.stop()
            # A healthy answer is reused for at most HEALTH_CACHE_SECONDS (1 s): the check turns within that.
            wait_until(lambda: httpx.get(llm.url + "/v1/health_check").status_code == 503, 10,
                       message="the health check to follow the stopped backend")
            down = httpx.get(llm.url + "/health/details")
            assert down.status_code == 503 and "unreachable" in down.json()["backend"]
            assert httpx.get(llm.url + "/health").status_code == 503
            failed = httpx.post(llm.url + "/v1/chat/completions", json={"messages": QUESTION, "stream": False})
            assert failed.status_code == 503 and failed.json()["error"]["type"] == "unavailable_error"
            with RemoteServer("ovgenai_server", backend_args, port=port):
                assert httpx.get(llm.url + "/v1/health_check").status_code == 200
                ok = httpx.post(llm.url + "/v1/chat/completions",
                                json={"messages": QUESTION, "stream": False, "max_tokens": 3}, timeout=60)
                assert ok.status_code == 200


def test_backend_killed_mid_stream_gives_error_event_and_done(default_model):
    with RemoteServer("ovgenai_server", ["--model", str(MODELS)]) as backend_server:
        with microservice(backend_server.url, default_model) as llm:
            body = {"messages": QUESTION, "max_tokens": 2000, "ignore_eos": True}
            with httpx.Client(timeout=60) as client, client.stream(
                "POST", llm.url + "/v1/chat/completions", json=body
            ) as response:
                lines = response.iter_lines()
                next(lines)
                os.kill(backend_server.process.pid, signal.SIGKILL)
                rest = [line for line in lines if line]
            assert rest[-1] == "data: [DONE]"
            assert json.loads(rest[-2][6:])["error"]["type"] == "upstream_error"


@pytest.fixture(scope="module")
def fake_openai():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", str(port), "upstream-key"],
                               cwd=ROOT)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/v1/models").status_code in (200, 401)
        except httpx.HTTPError:
            return False

    wait_until(up, 30, message="fake OpenAI server")
    yield url
    process.terminate()
    process.wait(10)


def test_fronts_any_openai_server_with_forwarded_key(fake_openai):
    with microservice(fake_openai, "echo", OPENAI_API_KEY="upstream-key") as llm:
        client = openai.OpenAI(base_url=llm.url + "/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "one two"}])
        assert reply.choices[0].message.content == "one two"
        assert httpx.get(llm.url + "/v1/health_check").status_code == 200
        cut = httpx.post(llm.url + "/v1/chat/completions", json={"model": "cut", "messages": "a b c"}, timeout=30)
        lines = sse_lines(cut)
        assert lines[-1] == "data: [DONE]" and "error" in json.loads(lines[-2][6:])
    with microservice(fake_openai, "echo") as keyless:
        denied = httpx.post(keyless.url + "/v1/chat/completions", json={"messages": "x", "stream": False})
        assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"


def test_backend_timeout_is_504(fake_openai):
    with microservice(fake_openai, "slow", OPENAI_API_KEY="upstream-key", READ_TIMEOUT="0.5") as llm:
        response = httpx.post(llm.url + "/v1/chat/completions", json={"messages": "x", "stream": False}, timeout=30)
        assert response.status_code == 504 and response.json()["error"]["type"] == "timeout_error"
