"""Dynamic batching (batcher.py) with a recording embed function in place of the model: concurrent requests share
a pipeline call within the size and token limits, large ones are split and reassembled in order, batches are shared
round-robin between the requests waiting (a small one never waits behind a large one), a full queue is refused, a
failed batch fails only its requests, a request whose client left is not embedded, and a lone short request is
counted and embedded in one call. The service with its real model: system/test_batching_settings.py."""

from __future__ import annotations

import asyncio

import pytest

from microservices.embedding.batcher import Batcher, QueueFull
from tests.support.waiting import settle, until


class Recorder:
    """Embeds a text as [len(text)], and remembers each batch; `gate` holds a call until set."""

    def __init__(self, fail_on: str | None = None):
        self.batches: list[list[str]] = []
        self.fail_on = fail_on
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        await asyncio.wait_for(self.gate.wait(), 10)
        self.batches.append(list(texts))
        if self.fail_on in texts:
            raise RuntimeError("the pipeline failed")
        return [[float(len(text))] for text in texts]


async def batcher_of(embed: Recorder, **limits) -> Batcher:
    options = {"max_batch_size": 8, "max_batch_tokens": 1000, "wait_seconds": 0.05, "max_queued_texts": 100,
               **limits}
    batcher = Batcher(embed, **options)
    batcher.start()
    return batcher


def tokens(texts: list[str]) -> list[int]:
    return [len(text) for text in texts]


async def test_concurrent_requests_share_one_call_and_get_their_own_vectors():
    embed = Recorder()
    batcher = await batcher_of(embed)
    requests = [["a", "bb"], ["ccc"], ["dddd", "eeeee"]]
    results = await asyncio.gather(*(batcher.submit(texts, tokens(texts)) for texts in requests))
    await batcher.close()
    assert results == [[[1.0], [2.0]], [[3.0]], [[4.0], [5.0]]]
    assert embed.batches == [["a", "ccc", "dddd", "bb", "eeeee"]]  # one text of each request in turn


async def test_a_large_request_is_split_by_size_and_tokens_and_reassembled_in_order():
    embed = Recorder()
    batcher = await batcher_of(embed, max_batch_size=3, max_batch_tokens=6, wait_seconds=0)
    texts = ["a", "bb", "ccc", "dddd", "e", "ffffffff"]  # the last one alone exceeds the token limit: still sent
    assert await batcher.submit(texts, tokens(texts)) == [[float(len(t))] for t in texts]
    await batcher.close()
    assert embed.batches == [["a", "bb", "ccc"], ["dddd", "e"], ["ffffffff"]]
    assert all(len(batch) <= 3 for batch in embed.batches)


async def test_a_small_request_gets_into_the_next_batch_while_a_large_one_is_embedded():
    embed = Recorder()
    embed.gate.clear()  # the large request's first batch holds the worker while the small one arrives
    batcher = await batcher_of(embed, max_batch_size=4, wait_seconds=0)
    large = [f"passage {i:02d}" for i in range(20)]
    first = asyncio.create_task(batcher.submit(large, tokens(large)))
    await until(lambda: batcher._in_batch)
    small = asyncio.create_task(batcher.submit(["hello"], [5]))
    await until(lambda: batcher.queued == 16 + 1)  # queued behind the large one's 16 left
    embed.gate.set()
    assert await small == [[5.0]]
    assert not first.done()  # answered before the large request, not after all of its texts
    assert await first == [[float(len(t))] for t in large]
    await batcher.close()
    assert embed.batches[0] == large[:4] and "hello" in embed.batches[1]
    assert [text for batch in embed.batches for text in batch if text != "hello"] == large  # in order


async def test_batches_take_turns_between_requests():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=2, wait_seconds=0)
    holder = asyncio.create_task(batcher.submit(["x"], [1]))
    await until(lambda: batcher._in_batch)
    requests = {name: [f"{name}{i}" for i in range(4)] for name in "abc"}
    tasks = [asyncio.create_task(batcher.submit(texts, tokens(texts))) for texts in requests.values()]
    await until(lambda: batcher.queued == 12)  # all three queued before the first of their batches is taken
    embed.gate.set()
    assert await asyncio.gather(*tasks) == [[[2.0]] * 4] * 3
    await holder
    await batcher.close()
    # Each request in turn, one text at a time, the next batch going on where the last one stopped.
    assert embed.batches[1:] == [["a0", "b0"], ["c0", "a1"], ["b1", "c1"], ["a2", "b2"], ["c2", "a3"], ["b3", "c3"]]


async def test_a_text_over_the_token_room_left_does_not_block_the_others():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=8, max_batch_tokens=10, wait_seconds=0)
    holder = asyncio.create_task(batcher.submit(["x"], [1]))
    await until(lambda: batcher._in_batch)
    long = asyncio.create_task(batcher.submit(["aaaaaa", "bbbbbbbb"], [6, 8]))
    short = asyncio.create_task(batcher.submit(["c", "d"], [1, 1]))
    await until(lambda: batcher.queued == 4)
    embed.gate.set()
    await asyncio.gather(holder, long, short)
    await batcher.close()
    # "bbbbbbbb" does not fit after "aaaaaa" and "c": it waits for the next batch, where it comes first.
    assert embed.batches[1:] == [["aaaaaa", "c", "d"], ["bbbbbbbb"]]


async def test_a_full_queue_is_refused():
    embed = Recorder()
    embed.gate.clear()  # the first batch holds the worker, so later texts queue up
    batcher = await batcher_of(embed, max_batch_size=1, max_queued_texts=2, wait_seconds=0)
    first = asyncio.create_task(batcher.submit(["a"], [1]))
    await until(lambda: batcher._in_batch)
    queued = asyncio.create_task(batcher.submit(["b", "c"], [1, 1]))
    await until(lambda: batcher.queued == 2)
    with pytest.raises(QueueFull):
        await batcher.submit(["d"], [1])
    embed.gate.set()
    assert await first == [[1.0]] and await queued == [[1.0], [1.0]]
    await batcher.close()


async def test_a_failed_batch_fails_its_requests_not_the_worker():
    embed = Recorder(fail_on="bad")
    batcher = await batcher_of(embed)
    with pytest.raises(RuntimeError, match="pipeline failed"):
        await batcher.submit(["bad", "good"], [3, 4])
    assert batcher.alive
    assert await batcher.submit(["fine"], [4]) == [[4.0]]
    await batcher.close()


async def test_a_model_call_that_fails_as_it_is_made_fails_its_request_not_the_worker():
    """The model process's calls are futures written at once: one refused on the spot (the process is starting
    again) raises where it is made, not when awaited."""
    stopped = True

    def count_and_embed(texts, _limit):
        if stopped:
            raise ConnectionError("the model process is starting again")
        future = asyncio.get_running_loop().create_future()
        future.set_result(([len(text) for text in texts], [[float(len(text))] for text in texts]))
        return future

    batcher = Batcher(Recorder(), 8, 1000, 0, 100, count_and_embed=count_and_embed)
    batcher.start()
    with pytest.raises(ConnectionError, match="starting again"):
        await batcher.submit_uncounted(["a query"], None)
    stopped = False
    assert batcher.alive and await batcher.submit_uncounted(["a query"], None) == ([7], [[7.0]])
    await batcher.close()


async def test_a_request_whose_client_left_is_not_embedded():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=1, wait_seconds=0)
    running = asyncio.create_task(batcher.submit(["first"], [5]))
    await until(lambda: batcher._in_batch)
    abandoned = asyncio.create_task(batcher.submit(["gone", "also gone"], [4, 9]))
    await until(lambda: batcher.queued == 2)
    abandoned.cancel()
    embed.gate.set()
    await running
    assert await batcher.submit(["next"], [4]) == [[4.0]]
    await batcher.close()
    assert ["gone"] not in embed.batches and ["also gone"] not in embed.batches


async def test_a_request_whose_client_left_leaves_the_queue_at_once():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=2, wait_seconds=0)
    texts = [f"t{i}" for i in range(10)]
    abandoned = asyncio.create_task(batcher.submit(texts, tokens(texts)))
    await until(lambda: batcher._in_batch)
    assert batcher.queued == 8
    abandoned.cancel()
    await asyncio.sleep(0)
    assert batcher.queued == 0  # not when the worker next looks: the gauge on /metrics says so now
    embed.gate.set()
    assert await batcher.submit(["next"], [4]) == [[4.0]]
    await batcher.close()
    assert embed.batches == [["t0", "t1"], ["next"]]


async def test_close_fails_what_still_waits():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=1, wait_seconds=0)
    running = asyncio.create_task(batcher.submit(["first"], [5]))
    waiting = asyncio.create_task(batcher.submit(["second"], [6]))
    await until(lambda: batcher._in_batch and batcher.queued == 1)
    embed.gate.set()  # close() waits for the batch in flight
    await batcher.close()
    with pytest.raises(RuntimeError, match="shutting down"):
        await waiting
    running.cancel()
    assert not batcher.alive


async def test_closing_answers_the_requests_of_the_batch_being_embedded():
    embed = Recorder()
    embed.gate.clear()  # the pipeline is busy with the batch when the service shuts down
    batcher = await batcher_of(embed, wait_seconds=0)
    request = asyncio.ensure_future(batcher.submit(["one"], [1]))
    await until(lambda: batcher._in_batch)  # the batch has left the queue for the pipeline
    closing = asyncio.ensure_future(batcher.close())
    await settle()
    assert not closing.done()  # waits for the pipeline, while this loop still runs
    embed.gate.set()
    await closing
    with pytest.raises(RuntimeError, match="shutting down"):
        await request


class CountingRecorder(Recorder):
    """Also counts and embeds a lone request in one call (len(text) tokens a text), recording it in `batches`."""

    async def count_and_embed(self, texts: list[str], limit: int | None):
        vectors = await self(texts)
        counts = tokens(texts)
        return counts, None if limit is not None and max(counts) > limit else vectors


async def test_a_lone_short_request_goes_at_once_counted_in_the_same_call():
    embed = CountingRecorder()
    batcher = Batcher(embed, 8, 1000, 0, 100, count_and_embed=embed.count_and_embed)
    batcher.start()
    assert batcher.takes_at_once(["a query"])
    assert await batcher.submit_uncounted(["a query", "b"], None) == ([7, 1], [[7.0], [1.0]])
    assert await batcher.submit_uncounted(["a query"], 3) == ([7], None)
    assert not batcher.takes_at_once(["x" * 1001]) and not batcher.takes_at_once(["x"] * 9)  # more than one batch
    embed.gate.clear()
    busy = asyncio.create_task(batcher.submit(["first"], [5]))
    await until(lambda: batcher._in_batch)
    assert not batcher.takes_at_once(["a query"])  # the model is busy: it would wait, so it is counted first
    embed.gate.set()
    await busy
    await batcher.close()
    waiting = Batcher(embed, 8, 1000, 0.05, 100, count_and_embed=embed.count_and_embed)
    assert not waiting.takes_at_once(["a query"])  # a batch that waits for company is cut by counted tokens


async def test_an_uncounted_request_is_a_batch_of_its_own_at_the_head_of_the_next_one():
    embed = CountingRecorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, wait_seconds=0)
    batcher._count_and_embed = embed.count_and_embed
    first = asyncio.create_task(batcher.submit(["first"], [5]))
    await until(lambda: batcher._in_batch)  # in the pipeline, held by the gate
    queued = asyncio.create_task(batcher.submit(["queued"], [6]))
    alone = asyncio.create_task(batcher.submit_uncounted(["alone"], None))
    later = asyncio.create_task(batcher.submit(["later"], [5]))
    await until(lambda: batcher.queued == 3)
    embed.gate.set()
    assert await alone == ([5], [[5.0]]) and await later == [[5.0]] and await queued == [[6.0]] and await first
    await batcher.close()
    assert embed.batches == [["first"], ["queued", "later"], ["alone"]]
