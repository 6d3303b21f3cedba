"""Ingestion's admission: INGEST_CONCURRENCY run, INGEST_QUEUE wait, the rest get a 429 in OpenAI's shape."""

from __future__ import annotations

import asyncio

import pytest

from microservices.gateway.ingestion.pool import IngestPool
from ovgenai_common.errors import APIError, ErrorKind


def test_slots_then_queue_then_429():
    async def scenario() -> None:
        pool = IngestPool(concurrency=1, queue=1)
        release = asyncio.Event()
        order: list[str] = []

        async def ingest(name: str) -> None:
            async with pool.admit():
                order.append(name)
                await release.wait()

        first = asyncio.create_task(ingest("first"))
        await asyncio.sleep(0)
        second = asyncio.create_task(ingest("second"))
        await asyncio.sleep(0)
        assert (pool.running, pool.waiting) == (1, 1)
        with pytest.raises(APIError) as refused:
            async with pool.admit():
                pass
        assert refused.value.kind is ErrorKind.OVERLOADED and refused.value.status == 429
        assert "INGEST_CONCURRENCY" in refused.value.message
        release.set()
        await asyncio.gather(first, second)
        assert order == ["first", "second"] and (pool.running, pool.waiting) == (0, 0)
        assert await pool.run(sum, [1, 2]) == 3  # on the pool's own thread
        pool.shutdown()

    asyncio.run(scenario())


def test_a_cancelled_waiter_leaves_the_queue():
    async def scenario() -> None:
        pool = IngestPool(concurrency=1, queue=1)
        hold = asyncio.Event()

        async def ingest() -> None:
            async with pool.admit():
                await hold.wait()

        running = asyncio.create_task(ingest())
        await asyncio.sleep(0)
        waiting = asyncio.create_task(ingest())
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert pool.waiting == 0
        hold.set()
        await running
        pool.shutdown()

    asyncio.run(scenario())
