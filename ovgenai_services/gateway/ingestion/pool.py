"""Ingestion's own bounded share of the process, in two stages, so that a client sending its body slowly holds
nobody else's ingest:

- a place for its body: at most INGEST_BODIES requests have their bodies read or held by the gateway at once
  (being received, waiting for a slot, or being ingested), which bounds ingestion's memory and disk; up to
  INGEST_QUEUE more wait for a place with their bodies still in the client's socket, and any beyond those are
  refused with a 429;
- a slot for its work, taken only once its body has arrived (dataprep.py's IngestRoute reads it first, held to the
  pool's `pace`: UPLOAD_MIN_RATE after UPLOAD_GRACE): at most INGEST_CONCURRENCY ingests run, each with a worker
  thread of the pool's own.

Parsing, hashing and spooling run on the pool's threads, not on the default executor that the vector store and the
rest of the gateway share, so ingests never starve answers of threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ovgenai_common.body import Pace
from ovgenai_common.errors import APIError, ErrorKind

from ..metrics import IngestMetrics

T = TypeVar("T")


class IngestPool:
    def __init__(self, concurrency: int, queue: int, bodies: int, pace: Pace, metrics: IngestMetrics | None = None):
        self.concurrency = concurrency
        self.queue = queue
        self.bodies = bodies
        self.pace = pace  # how fast a body must arrive
        self.metrics = metrics
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ingest")
        self._places = asyncio.Semaphore(bodies)
        self._slots = asyncio.Semaphore(concurrency)
        self.waiting = 0  # for a place, their bodies unread
        self.receiving = 0  # bodies arriving
        self.ready = 0  # bodies received, waiting for a slot
        self.running = 0  # holding a slot

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` on one of the pool's threads."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    @asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """A place for a request's body, held until the request ends; a wait in the queue for one, or a 429."""
        if self._places.locked() and self.waiting >= self.queue:
            if self.metrics:
                self.metrics.refused.inc()
            raise APIError(ErrorKind.OVERLOADED,
                           f"The gateway holds {self.bodies} ingest requests and {self.waiting} more are waiting "
                           "(INGEST_BODIES, INGEST_QUEUE); send this one again when one has finished.",
                           code="ingest_capacity")
        self.waiting += 1
        self._gauge()
        try:
            await self._places.acquire()
        finally:
            self.waiting -= 1
            self._gauge()
        try:
            yield
        finally:
            self._places.release()

    @asynccontextmanager
    async def receiving_body(self) -> AsyncIterator[None]:
        """Counts a body while it arrives (within a place)."""
        self.receiving += 1
        self._gauge()
        try:
            yield
        finally:
            self.receiving -= 1
            self._gauge()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """A slot for a received request's work: never refused, since only the requests holding a place wait."""
        self.ready += 1
        self._gauge()
        try:
            await self._slots.acquire()
        finally:
            self.ready -= 1
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
            self.metrics.waiting.set(self.waiting + self.ready)
            self.metrics.receiving.set(self.receiving)
            self.metrics.running.set(self.running)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
