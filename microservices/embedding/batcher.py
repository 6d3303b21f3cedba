"""Dynamic batching: texts of concurrent requests are embedded in one pipeline call.

A request's texts join a queue; a single worker takes as many queued texts as fit the batch and token limits
(waiting at most `batch_wait_ms` for company, and not at all when the queue is already full), awaits the model
(which embeds it in a process of its own: model_process.py), and resolves each request's future with its own
vectors in order. Large requests are split across batches and reassembled.

A request is counted (its tokens) before it joins the queue, since batches are cut by tokens, except a short one
that finds the batcher idle (`takes_at_once`): nothing queued, nothing being embedded, no wait for company. There is
nobody to batch it with, so it goes at once as a batch of its own, counted and embedded in one call of the model
(`count_and_embed`), which saves the count's round trip to the model process on every lone query.

A batch is formed round-robin across the queued requests, one text of each in turn, and a request that got a
text goes to the back of the line: a one-word query that arrives while thousands of another request's passages
wait is in the next batch, not behind all of them, while a request alone in the queue still fills every batch.
A request whose client has gone has its texts not yet embedded dropped from the queue at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    texts: list[str]
    tokens: list[int] | None  # None: not counted yet (embedded alone, counted in the same call)
    future: asyncio.Future
    results: list = field(default_factory=list)
    next_index: int = 0  # first text not yet handed to a batch
    done_count: int = 0
    limit: int | None = None  # an uncounted job's: embed nothing if a text has more tokens


class QueueFull(Exception):
    pass


Vectors = Sequence[Sequence[float]]
Counted = tuple[list[int], Vectors | None]  # each text's tokens, and the vectors (None: refused over its limit)


class Batcher:
    def __init__(
        self,
        embed: Callable[[list[str]], Awaitable[Vectors]],
        max_batch_size: int,
        max_batch_tokens: int,
        wait_seconds: float,
        max_queued_texts: int,
        on_batch: Callable[[int, int], None] | None = None,
        count_and_embed: Callable[[list[str], int | None], Awaitable[Counted]] | None = None,
    ):
        self._embed = embed
        self._count_and_embed = count_and_embed
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.wait_seconds = wait_seconds
        self.max_queued_texts = max_queued_texts
        self._on_batch = on_batch
        self._jobs: deque[_Job] = deque()
        self._in_batch: list[_Job] = []  # the jobs of the batch the pipeline is embedding (some left _jobs already)
        self._queued = 0
        self._wakeup = asyncio.Event()
        self._pipeline: asyncio.Future | None = None  # the model's call for the batch being embedded
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="embedding-batcher")

    async def close(self) -> None:
        pipeline = self._pipeline
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if pipeline is not None:  # the pipeline finishes its batch before the model is released
            await asyncio.wait([pipeline])
        for job in [*self._in_batch, *self._jobs]:  # every request still waiting is answered
            if not job.future.done():
                job.future.set_exception(RuntimeError("The service is shutting down."))

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    def takes_at_once(self, texts: list[str]) -> bool:
        """Whether `texts` would be embedded at once, as a batch of their own (see the module's docstring): the
        batcher is idle, waits for no company, and they fit one batch, their characters taken for their tokens."""
        return (self._count_and_embed is not None and not self.wait_seconds and not self._jobs
                and not self._in_batch and len(texts) <= self.max_batch_size
                and sum(map(len, texts)) <= self.max_batch_tokens)

    async def submit(self, texts: list[str], tokens: list[int]) -> list:
        """Each text's vector, `tokens` its tokens (for the batch's token limit)."""
        return await self._submit(_Job(texts, tokens, asyncio.get_running_loop().create_future(), [None] * len(texts)))

    async def submit_uncounted(self, texts: list[str], limit: int | None) -> Counted:
        """Each text's tokens and vectors, embedded as a batch of their own and counted in the same call (a
        request that `takes_at_once`); with a text over `limit` tokens, nothing is embedded (no vectors)."""
        loop = asyncio.get_running_loop()
        return await self._submit(_Job(texts, None, loop.create_future(), [None] * len(texts), limit=limit))

    async def _submit(self, job: _Job):
        texts, future = job.texts, job.future
        if self._queued + len(texts) > self.max_queued_texts:
            raise QueueFull()
        self._jobs.append(job)
        self._queued += len(texts)
        self._wakeup.set()
        try:
            return await future
        finally:
            if not future.done():
                future.cancel()
            if future.cancelled():  # the caller went away (its task cancelled): drop what is not yet embedded
                self._drop(job)

    @property
    def queued(self) -> int:
        """Texts waiting for a batch (not counting those the pipeline is embedding)."""
        return self._queued

    def _drop(self, job: _Job) -> None:
        with contextlib.suppress(ValueError):  # not queued: every text of it has been handed to a batch
            self._jobs.remove(job)
            self._queued -= len(job.texts) - job.next_index

    def _take_batch(self) -> list[tuple[_Job, int]]:
        """Round-robin (see the module's docstring): each turn takes the next text of the request at the head of
        the queue and sends the request to the back while it has more. A request whose next text would pass the
        token limit sits this batch out, keeping its place at the head for the next one. A request not counted
        yet is a batch of its own: whole when it comes first, else at the head of the next one."""
        batch: list[tuple[_Job, int]] = []
        tokens = 0
        waiting: list[_Job] = []  # skipped for this batch, in queue order
        while self._jobs and len(batch) < self.max_batch_size:
            job = self._jobs.popleft()
            if job.future.done():  # failed or cancelled meanwhile
                self._queued -= len(job.texts) - job.next_index
                continue
            if job.tokens is None:
                if batch:
                    waiting.append(job)
                    continue
                self._queued -= len(job.texts)
                job.next_index = len(job.texts)
                batch = [(job, index) for index in range(len(job.texts))]
                break
            index = job.next_index
            cost = job.tokens[index]
            if batch and tokens + cost > self.max_batch_tokens:
                waiting.append(job)
                continue
            batch.append((job, index))
            tokens += cost
            job.next_index += 1
            self._queued -= 1
            if job.next_index < len(job.texts):
                self._jobs.append(job)
        self._jobs.extendleft(reversed(waiting))
        return batch

    async def _run(self) -> None:
        while True:
            if not self._jobs:
                self._wakeup.clear()
                await self._wakeup.wait()
            if self._queued < self.max_batch_size and self.wait_seconds > 0:
                await asyncio.sleep(self.wait_seconds)
            batch = self._take_batch()
            if not batch:
                continue
            self._in_batch = [job for job, _ in batch]
            try:
                await self._embed_batch(batch)
            except Exception as error:  # a failed batch fails its requests, not the service
                logger.exception("embedding batch of %d failed", len(batch))
                for job, _ in batch:
                    if not job.future.done():
                        job.future.set_exception(error)
            # Not when cancelled (closing): close() answers the batch's requests.
            self._in_batch, self._pipeline = [], None

    async def _embed_batch(self, batch: list[tuple[_Job, int]]) -> None:
        """The model's call for `batch`, shielded: closing waits for it rather than cutting it off."""
        texts = [job.texts[i] for job, i in batch]
        first = batch[0][0]
        if first.tokens is None:  # a request alone, counted in the same call
            assert self._count_and_embed is not None  # only then does takes_at_once let one in
            self._pipeline = asyncio.ensure_future(self._count_and_embed(texts, first.limit))
            counted = await asyncio.shield(self._pipeline)
            if self._on_batch:
                self._on_batch(len(texts), sum(counted[0]))
            if not first.future.done():
                first.future.set_result(counted)
            return
        self._pipeline = asyncio.ensure_future(self._embed(texts))
        vectors = await asyncio.shield(self._pipeline)
        if self._on_batch:
            self._on_batch(len(texts), sum(job.tokens[i] for job, i in batch if job.tokens))
        for (job, index), vector in zip(batch, vectors, strict=True):
            job.results[index] = vector
            job.done_count += 1
            if job.done_count == len(job.texts) and not job.future.done():
                job.future.set_result(job.results)
