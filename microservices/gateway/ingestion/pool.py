"""Ingestion's own bounded share of the process: at most INGEST_CONCURRENCY ingests run, each with a worker thread
of their own pool; up to INGEST_QUEUE more wait for a slot, and any beyond those are refused with a 429.

A request is admitted before its body is read (dataprep.py's IngestRoute), so a waiting upload is still in the
client's socket, not in the gateway's memory or disk; an admitted one is bounded by the body limit and, as it is
processed, by the section and batch sizes. Parsing, hashing and spooling run on the pool's threads, not on the
default executor that the vector store and the rest of the gateway share, so ingests never starve answers of
threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ovgenai_common.errors import APIError, ErrorKind

from ..metrics import IngestMetrics

T = TypeVar("T")


class IngestPool:
    def __init__(self, concurrency: int, queue: int, metrics: IngestMetrics | None = None):
        self.concurrency = concurrency
        self.queue = queue
        self.metrics = metrics
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ingest")
        self._slots = asyncio.Semaphore(concurrency)
        self.running = 0
        self.waiting = 0

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` on one of the pool's threads."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    @asynccontextmanager
    async def admit(self) -> AsyncIterator[None]:
        if self._slots.locked() and self.waiting >= self.queue:
            if self.metrics:
                self.metrics.refused.inc()
            raise APIError(ErrorKind.OVERLOADED,
                           f"The gateway is ingesting {self.concurrency} requests and {self.waiting} more are waiting "
                           "(INGEST_CONCURRENCY, INGEST_QUEUE); send this one again when one has finished.",
                           code="ingest_capacity")
        self.waiting += 1
        self._gauge()
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self._gauge()
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()
            self._gauge()

    def _gauge(self) -> None:
        if self.metrics:
            self.metrics.waiting.set(self.waiting)
            self.metrics.running.set(self.running)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
