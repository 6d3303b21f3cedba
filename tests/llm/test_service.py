"""Talking to the backend: probes that arrive together share one health check, and a healthy answer is reused for a
bounded time (timing a real backend cannot be made to hold still for, hence a fake transport and clock); the relay
passes a stream through byte for byte and ends one the backend cut with an error event and [DONE]."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ovgenai_services.llm.service import Backend
from ovgenai_services.llm.settings import LLMSettings
from tests.support.waiting import settle, until


async def test_concurrent_probes_share_one_check_and_later_ones_check_again():
    checks = 0
    release = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal checks
        assert request.url.path == "/health"
        checks += 1
        await release.wait()
        return httpx.Response(200, json={"status": "ok"})

    settings = LLMSettings(llm_endpoint="http://upstream", health_cache_seconds=0)
    backend = Backend(settings, transport=httpx.MockTransport(handler))
    probes = [asyncio.create_task(backend.health()) for _ in range(10)]
    await until(lambda: checks >= 1)  # a check in flight,
    await settle()  # and every probe arrived while it is
    release.set()
    assert await asyncio.gather(*probes) == [(True, "ok")] * 10
    assert checks == 1
    assert await backend.health() == (True, "ok")  # the next probe is a new check, not a cached answer
    assert checks == 2
    await backend.close()


async def test_a_cancelled_probe_does_not_cancel_the_shared_check():
    release, checking = asyncio.Event(), asyncio.Event()

    async def handler(_request: httpx.Request) -> httpx.Response:
        checking.set()
        await release.wait()
        return httpx.Response(503, json={"error": {"message": "Loading model"}})

    backend = Backend(LLMSettings(llm_endpoint="http://upstream"), transport=httpx.MockTransport(handler))
    first, second = asyncio.create_task(backend.health()), asyncio.create_task(backend.health())
    await until(checking.is_set)
    await settle()  # both probes wait on the one check
    first.cancel()
    release.set()
    ok, reason = await second
    assert not ok and "503" in reason
    await backend.close()


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_healthy_answer_is_reused_for_a_bounded_time_and_refreshed_in_the_background():
    answers = [200, 503, 503, 200]
    checks = 0

    async def handler(_request: httpx.Request) -> httpx.Response:
        nonlocal checks
        checks += 1
        return httpx.Response(answers[checks - 1], json={"error": {"message": "Loading model"}})

    clock = Clock()
    settings = LLMSettings(llm_endpoint="http://upstream", health_cache_seconds=1.0)
    backend = Backend(settings, transport=httpx.MockTransport(handler), clock=clock)
    assert await backend.health() == (True, "ok") and checks == 1
    clock.now += 0.3
    assert await backend.health() == (True, "ok") and checks == 1  # fresh enough: no round trip
    clock.now += 0.3
    assert await backend.health() == (True, "ok")  # past half its age: answered, and refreshed meanwhile
    await until(lambda: backend.replicas[0].down)  # the refresh has ended
    assert checks == 2  # the refresh found the backend loading: the healthy answer is forgotten
    ok, reason = await backend.health()
    assert not ok and "503" in reason and checks == 3  # so the next probe checks again
    assert await backend.health() == (True, "ok") and checks == 4  # and so does the next: recovery shows at once
    await backend.close()


async def test_an_unreachable_backend_is_checked_again_at_the_next_probe():
    healthy = True

    async def handler(request: httpx.Request) -> httpx.Response:
        if not healthy:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"status": "ok"})

    backend = Backend(LLMSettings(llm_endpoint="http://upstream", health_cache_seconds=60),
                      transport=httpx.MockTransport(handler), clock=Clock())
    assert await backend.health() == (True, "ok")
    healthy = False
    try:
        await backend.post("/v1/chat/completions", {})
    except Exception as error:  # the request's own error is the shared 503
        assert getattr(error, "status", None) == 503
    ok, reason = await backend.health()
    assert not ok and "unreachable" in reason
    await backend.close()


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
