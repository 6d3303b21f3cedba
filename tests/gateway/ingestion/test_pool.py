"""Ingestion's admission in two stages: INGEST_BODIES places (INGEST_QUEUE more wait, the rest get a 429 in OpenAI's
shape), and INGEST_CONCURRENCY slots taken only by requests whose bodies have arrived."""

from __future__ import annotations

import asyncio

import pytest

from ovgenai_common.body import Pace
from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.gateway.ingestion.pool import IngestPool

PACE = Pace(min_rate=1000, grace=30)


def test_places_then_queue_then_429():
    async def scenario() -> None:
        pool = IngestPool(concurrency=1, queue=1, bodies=1, pace=PACE)
        release = asyncio.Event()
        order: list[str] = []

        async def ingest(name: str) -> None:
            async with pool.place(), pool.slot():
                order.append(name)
                await release.wait()

        first = asyncio.create_task(ingest("first"))
        await asyncio.sleep(0)
        second = asyncio.create_task(ingest("second"))
        await asyncio.sleep(0)
        assert (pool.running, pool.waiting) == (1, 1)
        with pytest.raises(APIError) as refused:
            async with pool.place():
                pass
        assert refused.value.kind is ErrorKind.OVERLOADED and refused.value.status == 429
        assert "INGEST_BODIES" in refused.value.message and refused.value.code == "ingest_capacity"
        release.set()
        await asyncio.gather(first, second)
        assert order == ["first", "second"] and (pool.running, pool.waiting) == (0, 0)
        assert await pool.run(sum, [1, 2]) == 3  # on the pool's own thread
        pool.shutdown()

    asyncio.run(scenario())


def test_a_body_still_arriving_holds_a_place_and_no_slot():
    """Slow senders fill places; the slots stay free for the requests whose bodies have come."""
    async def scenario() -> None:
        pool = IngestPool(concurrency=1, queue=0, bodies=3, pace=PACE)
        arrived = asyncio.Event()

        async def slow_sender() -> None:
            async with pool.place(), pool.receiving_body():
                await arrived.wait()

        slow = [asyncio.create_task(slow_sender()) for _ in range(2)]
        await asyncio.sleep(0)
        assert (pool.receiving, pool.running) == (2, 0)
        async with pool.place(), pool.slot():  # the third is served at once
            assert (pool.receiving, pool.running) == (2, 1)
        arrived.set()
        await asyncio.gather(*slow)
        assert (pool.receiving, pool.running, pool.waiting) == (0, 0, 0)
        pool.shutdown()

    asyncio.run(scenario())


def test_a_cancelled_waiter_leaves_the_queue():
    async def scenario() -> None:
        pool = IngestPool(concurrency=1, queue=1, bodies=1, pace=PACE)
        hold = asyncio.Event()

        async def ingest() -> None:
            async with pool.place():
                await hold.wait()

        running = asyncio.create_task(ingest())
        await asyncio.sleep(0)
        waiting = asyncio.create_task(ingest())
        await asyncio.sleep(0)
        assert pool.waiting == 1
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert pool.waiting == 0
        hold.set()
        await running
        pool.shutdown()

    asyncio.run(scenario())
