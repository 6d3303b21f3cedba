"""Clients that leave never wedge admission. Storms of clients disconnect while their requests are being admitted, while
they wait for their turn, and while they run, streamed and not, at the backend, through the LLM microservice (the relay)
and through the gateway; after each, another client is answered, the backend's engine and its waiting line are empty,
/health is 200 and its watchdog counted no stall. Before request/fair_share.py dropped requests that had left from the
line, one disconnect as its turn came left the line unable to move while /health said 200."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import gateway_env
from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, RemoteServer, llm_microservice, wait_until

STORM = 22  # more than the engine runs (4) and lets wait ahead of it (16): some always wait for their turn
STAGES = ("being admitted", "waiting for their turn", "running")


@pytest.fixture(scope="module")
def chain(default_model, embedding_service, tmp_path_factory) -> Iterator[dict[str, RemoteServer]]:
    """A backend that runs 4 sequences at once, the relay in front of it, and the gateway in front of the relay."""
    args = ["--model", str(MODELS), "--max_num_seqs", "4", "--max_waiting_requests", "124", "--max_queue_wait", "0"]
    with RemoteServer("ovgenai_server", args) as backend, llm_microservice(backend.url, default_model) as relay:
        env = gateway_env(embedding_service.url, relay.url, tmp_path_factory.mktemp("storm-gateway"))
        with RemoteServer("ovgenai_services.gateway", env=env) as gateway:
            yield {"backend": backend, "relay": relay, "gateway": gateway}


def request_bytes(url: str, path: str, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    host = urlsplit(url).netloc
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode() + payload


def storm(url: str, path: str, body: dict, stage: str, backend: str) -> None:
    """STORM clients send the request, then all leave at once at `stage` of the backend's work."""
    request = request_bytes(url, path, body)
    netloc = urlsplit(url)
    sockets = [socket.create_connection((netloc.hostname, netloc.port), timeout=30) for _ in range(STORM)]
    try:
        for sock in sockets:
            sock.sendall(request)
        if stage == "waiting for their turn":
            wait_until(lambda: metric(backend, "ovgenai:num_requests_waiting") >= 2, 120, interval=0.01,
                       message="some of the storm's requests waiting")
        elif stage == "running":
            wait_until(lambda: metric(backend, "ovgenai:num_requests_running") >= 4, 120, interval=0.01,
                       message="the engine's batch full of the storm's requests")
    finally:
        for sock in sockets:  # at once: the server meets every disconnect in the same turns of its loop
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.close()


def idle(backend: str) -> bool:
    return metric(backend, "ovgenai:num_requests_running") + metric(backend, "ovgenai:num_requests_waiting") == 0


DOORS = {  # where a client knocks, and what it asks
    "backend": ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 64, "ignore_eos": True}),
    "relay": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a long story."}],
                                       "max_tokens": 64, "ignore_eos": True}),
    "gateway": ("/v1/chatqna", {"messages": "Tell me a long story.", "max_tokens": 64}),
}


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "streamed"])
@pytest.mark.parametrize("door", sorted(DOORS))
def test_clients_that_leave_at_any_stage_never_wedge_admission(chain, default_model, door, stream):
    backend = chain["backend"].url
    path, body = DOORS[door]
    body = {**body, "stream": stream} | ({"model": default_model} if door != "gateway" else {})
    for stage in STAGES:
        storm(chain[door].url, path, body, stage, backend)
        # another client (another address) is answered at once, whatever the storm left behind
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=60) as other:
            reply = other.post(backend + "/v1/chat/completions", json={
                "model": default_model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status_code == 200, (stage, reply.text)
        wait_until(lambda: idle(backend), 60, message=f"the backend idle after clients left {stage}")
        assert httpx.get(backend + "/health", timeout=10).status_code == 200, stage
    assert metric(backend, "ovgenai:admission_stalls_total") == 0
