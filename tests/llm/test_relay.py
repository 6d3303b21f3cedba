"""The relay's end-of-stream detection, on upstream byte streams a real backend can produce but rarely does."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import Request

from microservices.llm.router import relay
from microservices.llm.service import Backend
from microservices.llm.settings import LLMSettings
from ovgenai_common.cancellation import ClientDisconnected


async def relay_of(chunks: list[bytes]) -> bytes:
    async def stream():
        for chunk in chunks:
            yield chunk

    transport = httpx.MockTransport(lambda _: httpx.Response(200, content=stream()))
    backend = Backend(LLMSettings(llm_endpoint="http://upstream"), transport=transport)
    response = await backend.open_stream("/v1/chat/completions", {})
    out = b"".join([part async for part in backend.relay(response)])
    await backend.close()
    return out


@pytest.mark.parametrize(
    "chunks",
    [
        [b'data: {"x": 1}\n\n', b"data: [DONE]\n\n"],
        [b'data: {"x": 1}\n\ndata: [DO', b"NE]\n\n"],  # split across reads
        [b"data: [DONE]\n\n", b": ping - 2026-11-22 05:00:00\r\n\r\n"],  # keep-alive after the end
    ],
)
async def test_complete_streams_pass_through_unchanged(chunks):
    assert await relay_of(chunks) == b"".join(chunks)


async def test_truncated_stream_gets_error_event_and_done():
    out = await relay_of([b'data: {"x": 1}\n\ndata: {"x"'])
    assert out.endswith(b"data: [DONE]\n\n") and b'"type":"upstream_error"' in out


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
