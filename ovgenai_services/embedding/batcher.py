"""Dynamic batching: texts of concurrent requests are counted and embedded in one call of the model.

A request's texts join a queue; a single worker takes as many queued texts as fit the batch's size and token limits
(waiting at most `batch_wait_ms` for company, and not at all when the queue is already full), awaits the model
(which embeds them in a process of its own: model_process.py), and resolves each request's future with its texts'
tokens and vectors in order. Large requests are split across batches and reassembled.

The model's call tokenizes each text once, for its count and its vector alike, so a text's tokens are not known
until its batch returns. Batches are cut here by an estimate, its characters times the tokens per character of the
last batch's texts (at most the model's length, to which a longer text is cut), and in the model process by the
tokens it counted: a batch that holds more than its estimate runs in more than one inference. A request with a text
over its `limit` is answered with its counts and no vectors as soon as that batch returns (the service refuses it),
and its texts not yet embedded leave the queue. A request's `cut` (vLLM's truncate_prompt_tokens) goes with each of
its texts: the model process cuts them to it.

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

Vectors = Sequence[Sequence[float]]
# Each text's tokens (before any cut), and its vectors: None when a text had more tokens than its request's limit.
Counted = tuple[list[int], Vectors | None]
# The model's call: texts, each one's limit (None: cut, not refused) and each one's cut (None: the model's length) in,
# each text's tokens and a vector a text out (a row of zeros for a text over its limit, or None when every text was).
Embed = Callable[[list[str], list[int | None], list[int | None]], Awaitable[tuple[list[int], Vectors | None]]]


@dataclass
class _Job:
    texts: list[str]
    limit: int | None  # a text with more tokens refuses the request: nothing more of it is embedded
    future: asyncio.Future
    cut: int | None = None  # its texts cut to this many tokens (None: the model's length)
    counts: list[int] = field(init=False)  # each text's tokens, once its batch has returned
    vectors: list = field(init=False)
    next_index: int = 0  # first text not yet handed to a batch
    done_count: int = 0

    def __post_init__(self):
        self.counts, self.vectors = [0] * len(self.texts), [None] * len(self.texts)


class QueueFull(Exception):
    pass


class Batcher:
    def __init__(
        self,
        embed: Embed,
        max_batch_size: int,
        max_batch_tokens: int,
        max_text_tokens: int,
        wait_seconds: float,
        max_queued_texts: int,
        on_batch: Callable[[int, int], None] | None = None,
    ):
        self._embed = embed
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_text_tokens = max_text_tokens  # the model's length, to which a longer text is cut
        self.wait_seconds = wait_seconds
        self.max_queued_texts = max_queued_texts
        self._on_batch = on_batch
        self.tokens_per_character = 1.0  # learnt from each batch's counts; characters taken for tokens until then
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

    async def submit(self, texts: list[str], limit: int | None = None, cut: int | None = None) -> Counted:
        """Each text's tokens and vectors; with a text over `limit` tokens, the tokens counted so far (up to that
        text's, zeros after) and no vectors. `cut`: each text cut to this many tokens (None: the model's length)."""
        job = _Job(texts, limit, asyncio.get_running_loop().create_future(), cut)
        if self._queued + len(texts) > self.max_queued_texts:
            raise QueueFull()
        self._jobs.append(job)
        self._queued += len(texts)
        self._wakeup.set()
        future = job.future
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

    def estimate(self, text: str) -> int:
        """A text's tokens as embedded, before the model has counted them (see the module's docstring)."""
        return max(1, min(self.max_text_tokens, round(len(text) * self.tokens_per_character)))

    def _learn(self, texts: list[str], counts: list[int]) -> None:
        """The tokens per character of a batch's texts within the model's length (a longer text is estimated at
        that length whatever its characters); a batch without any leaves the last one's."""
        within = [(n, len(text)) for text, n in zip(texts, counts, strict=True) if n <= self.max_text_tokens]
        if within:
            self.tokens_per_character = sum(n for n, _ in within) / max(1, sum(size for _, size in within))

    def _drop(self, job: _Job) -> None:
        with contextlib.suppress(ValueError):  # not queued: every text of it has been handed to a batch
            self._jobs.remove(job)
            self._queued -= len(job.texts) - job.next_index

    def _take_batch(self) -> list[tuple[_Job, int]]:
        """Round-robin (see the module's docstring): each turn takes the next text of the request at the head of
        the queue and sends the request to the back while it has more. A request whose next text would pass the
        token limit sits this batch out, keeping its place at the head for the next one."""
        batch: list[tuple[_Job, int]] = []
        tokens = 0
        waiting: list[_Job] = []  # skipped for this batch, in queue order
        while self._jobs and len(batch) < self.max_batch_size:
            job = self._jobs.popleft()
            if job.future.done():  # failed or cancelled meanwhile
                self._queued -= len(job.texts) - job.next_index
                continue
            index = job.next_index
            cost = self.estimate(job.texts[index])
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
        self._pipeline = asyncio.ensure_future(self._embed(texts, [job.limit for job, _ in batch],
                                                           [job.cut for job, _ in batch]))
        counts, vectors = await asyncio.shield(self._pipeline)
        self._learn(texts, counts)
        embedded = [min(n, job.cut or self.max_text_tokens) for (job, _), n in zip(batch, counts, strict=True)
                    if job.limit is None or n <= job.limit]
        if self._on_batch and embedded:
            self._on_batch(len(embedded), sum(embedded))
        for position, ((job, index), count) in enumerate(zip(batch, counts, strict=True)):
            if job.future.done():  # refused by an earlier text of this batch, or its client left
                continue
            job.counts[index] = count
            if job.limit is not None and count > job.limit:
                job.future.set_result((job.counts, None))
                self._drop(job)
                continue
            assert vectors is not None  # a text within its limit was embedded
            job.vectors[index] = vectors[position]
            job.done_count += 1
            if job.done_count == len(job.texts):
                job.future.set_result((job.counts, job.vectors))
