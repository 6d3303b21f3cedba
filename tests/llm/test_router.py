"""The LLM microservice's routes: every body parsed as JSON within the shared limits, failures of the backend said
without its address (clients need not learn the internal network), and a relayed request released (its upstream
closed, its replica's count down) however its client leaves."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import Request

from ovgenai_common.cancellation import ClientDisconnected
from ovgenai_services.llm.app import create_app
from ovgenai_services.llm.router import relay
from ovgenai_services.llm.service import Backend
from ovgenai_services.llm.settings import LLMSettings

BACKEND = "http://10.1.2.3:8008"


@asynccontextmanager
async def llm(backend):
    app = create_app(LLMSettings(llm_endpoint=BACKEND), transport=httpx.MockTransport(backend))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            yield http


async def test_deep_json_is_refused_whatever_its_content_type():
    """It parses every body as JSON itself (OPEA's clients do not always say application/json)."""
    sent = []
    async with llm(lambda request: sent.append(request) or httpx.Response(200, json={})) as http:
        for content_type in ("text/plain", "application/json"):
            deep = await http.post("/v1/chat/completions", headers={"Content-Type": content_type},
                                   content=b'{"messages": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")
            assert deep.status_code == 400 and deep.json()["error"]["code"] == "json_too_deep", deep.text
    assert not sent  # nothing reached the backend


async def test_an_unreachable_backend_is_a_503_that_does_not_name_it(caplog):
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with llm(refuse) as http:
        for stream in (False, True):
            reply = await http.post("/v1/chat/completions", json={"model": "m", "messages": "hi", "stream": stream})
            assert reply.status_code == 503
            assert reply.json()["error"]["message"] == "The backend is unreachable (ConnectError)."
        health = await http.get("/health/details")
        assert health.status_code == 503 and "unreachable" in health.text
        for answer in (reply, health):
            assert "10.1.2.3" not in answer.text
    assert BACKEND in caplog.text  # the operator still learns where it looked


async def endless():
    while True:
        yield b'data: {"x": 1}\n\n'
        await asyncio.sleep(0.001)


class NoMetrics:
    def observe(self, *args) -> None:
        pass


async def served(receive, send) -> tuple[Backend, list[httpx.Response]]:
    """A streamed request through the microservice's route to a backend that never ends its stream, the ASGI
    response run against `receive` and `send` as uvicorn runs it (ASGI spec 2.3: it listens for a disconnect)."""
    backend = Backend(LLMSettings(llm_endpoint="http://upstream"),
                      transport=httpx.MockTransport(lambda _: httpx.Response(200, content=endless())))
    upstreams: list[httpx.Response] = []
    open_stream = backend.open_stream

    async def recorded(*args):
        upstreams.append(await open_stream(*args))
        return upstreams[-1]

    backend.open_stream = recorded
    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    response = await relay(request, "/v1/chat/completions", {"stream": True}, True, backend, NoMetrics())
    await response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)
    return backend, upstreams


def released(backend: Backend, upstreams: list[httpx.Response]) -> bool:
    [upstream] = upstreams
    return upstream.is_closed and [r.in_flight for r in backend.replicas] == [0] and not backend._streams


async def test_a_client_gone_before_the_first_chunk_releases_the_upstream():
    """The response is cancelled before the relay has started: the backend must still be told (its request closed,
    so it aborts the generation) and the replica must not count the stream in flight for good."""
    async def receive():
        return {"type": "http.disconnect"}

    async def send(_message):
        await asyncio.sleep(0.01)

    backend, upstreams = await served(receive, send)
    assert released(backend, upstreams)


async def test_a_client_gone_mid_stream_releases_the_upstream():
    sent: list[dict] = []
    gone = asyncio.Event()

    async def receive():
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
        if len(sent) == 5:
            gone.set()
        await asyncio.sleep(0)

    backend, upstreams = await served(receive, send)
    assert len(sent) >= 5 and sent[1]["body"].startswith(b"data: ")
    assert released(backend, upstreams)


async def test_a_unary_request_whose_client_left_is_cancelled_and_leaves_its_replica():
    """The route cancels a unary request when its client leaves (the real backend's abort is checked in
    system/test_llm_microservice.py); the replica must not count it in flight for good, or routing by load would
    shun a replica that serves nothing."""
    started = asyncio.Event()

    async def never_answers(_request):
        started.set()
        await asyncio.Event().wait()

    backend = Backend(LLMSettings(llm_endpoint="http://upstream"), transport=httpx.MockTransport(never_answers))
    received = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if received:
            return received.pop()
        await started.wait()
        return {"type": "http.disconnect"}

    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    with pytest.raises(ClientDisconnected):  # which every service answers with 499 (ovgenai_common/errors.py)
        await relay(request, "/v1/chat/completions", {"messages": []}, False, backend, NoMetrics())
    assert [replica.in_flight for replica in backend.replicas] == [0]
    await backend.close()
