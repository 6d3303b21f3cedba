"""Health checks of the backend: probes that arrive together share one check (timing a real backend cannot be
made to hold still for, hence a fake transport)."""

from __future__ import annotations

import asyncio

import httpx

from microservices.llm.service import Backend
from microservices.llm.settings import LLMSettings


async def test_concurrent_probes_share_one_check_and_later_ones_check_again():
    checks = 0
    release = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal checks
        assert request.url.path == "/health"
        checks += 1
        await release.wait()
        return httpx.Response(200, json={"status": "ok"})

    backend = Backend(LLMSettings(llm_endpoint="http://upstream"), transport=httpx.MockTransport(handler))
    probes = [asyncio.create_task(backend.health()) for _ in range(10)]
    await asyncio.sleep(0.05)
    release.set()
    assert await asyncio.gather(*probes) == [(True, "ok")] * 10
    assert checks == 1
    assert await backend.health() == (True, "ok")  # the next probe is a new check, not a cached answer
    assert checks == 2
    await backend.close()


async def test_a_cancelled_probe_does_not_cancel_the_shared_check():
    release = asyncio.Event()

    async def handler(_request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(503, json={"error": {"message": "Loading model"}})

    backend = Backend(LLMSettings(llm_endpoint="http://upstream"), transport=httpx.MockTransport(handler))
    first, second = asyncio.create_task(backend.health()), asyncio.create_task(backend.health())
    await asyncio.sleep(0.05)
    first.cancel()
    release.set()
    ok, reason = await second
    assert not ok and "503" in reason
    await backend.close()
