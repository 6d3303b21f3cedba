"""Dynamic batching (batcher.py) with a recording model call in its place: concurrent requests share a call within
the size and token limits (tokens estimated from characters at the tokens per character the last call counted),
large ones are split and reassembled in order, batches are shared round-robin between the requests waiting (a small
one never waits behind a large one), a request with a text over its limit is answered with its counts and leaves the
queue, a full queue is refused, a failed batch fails only its requests, and a request whose client left is not
embedded. The service with its real model: system/test_batching_settings.py."""

from __future__ import annotations

import asyncio

import pytest

from ovgenai_services.embedding.batcher import Batcher, QueueFull
from tests.support.waiting import settle, until


class Recorder:
    """Counts `per_character` tokens a character and embeds a text as [its tokens] (zeros over its limit), as the
    model process's one call does; remembers each batch; `gate` holds a call until set."""

    def __init__(self, fail_on: str | None = None, per_character: int = 1):
        self.batches: list[list[str]] = []
        self.cuts: list[list[int | None]] = []  # each batch's texts' cuts
        self.fail_on = fail_on
        self.per_character = per_character
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, texts: list[str], limits: list[int | None], cuts: list[int | None]):
        await asyncio.wait_for(self.gate.wait(), 10)
        self.batches.append(list(texts))
        self.cuts.append(list(cuts))
        if self.fail_on in texts:
            raise RuntimeError("the pipeline failed")
        counts = [len(text) * self.per_character for text in texts]
        refused = [limit is not None and n > limit for n, limit in zip(counts, limits, strict=True)]
        return counts, [[0.0] if over else [float(n)] for n, over in zip(counts, refused, strict=True)]


async def batcher_of(embed: Recorder, **limits) -> Batcher:
    options = {"max_batch_size": 8, "max_batch_tokens": 1000, "max_text_tokens": 100, "wait_seconds": 0.05,
               "max_queued_texts": 100, **limits}
    batcher = Batcher(embed, **options)
    batcher.start()
    return batcher


def embedded(texts: list[str]) -> tuple[list[int], list[list[float]]]:
    """What the recorder answers for a request's texts: a token a character."""
    return [len(text) for text in texts], [[float(len(text))] for text in texts]


async def test_concurrent_requests_share_one_call_and_get_their_own_tokens_and_vectors():
    embed = Recorder()
    batcher = await batcher_of(embed)
    requests = [["a", "bb"], ["ccc"], ["dddd", "eeeee"]]
    results = await asyncio.gather(*(batcher.submit(texts) for texts in requests))
    await batcher.close()
    assert results == [embedded(texts) for texts in requests]
    assert embed.batches == [["a", "ccc", "dddd", "bb", "eeeee"]]  # one text of each request in turn


async def test_a_large_request_is_split_by_size_and_tokens_and_reassembled_in_order():
    embed = Recorder()
    batcher = await batcher_of(embed, max_batch_size=3, max_batch_tokens=6, wait_seconds=0)
    texts = ["a", "bb", "ccc", "dddd", "e", "ffffffff"]  # the last one alone exceeds the token limit: still sent
    assert await batcher.submit(texts) == embedded(texts)
    await batcher.close()
    assert embed.batches == [["a", "bb", "ccc"], ["dddd", "e"], ["ffffffff"]]


async def test_tokens_are_estimated_at_the_last_batch_s_tokens_per_character_within_the_model_s_length():
    embed = Recorder(per_character=2)
    batcher = await batcher_of(embed, max_text_tokens=10, wait_seconds=0)
    assert [batcher.estimate(text) for text in ("", "abc", "x" * 50)] == [1, 3, 10]  # characters, until a batch
    assert await batcher.submit(["abcd"]) == ([8], [[8.0]])
    assert batcher.tokens_per_character == 2 and [batcher.estimate(text) for text in ("abc", "abcdefgh")] == [6, 10]
    assert await batcher.submit(["abcdefgh", "a"]) == ([16, 2], [[16.0], [2.0]])  # one over the model's length
    await batcher.submit(["abcdefgh"])
    assert batcher.tokens_per_character == 2  # learnt from the texts within it; a batch of none leaves it
    batcher.max_batch_tokens = 12
    texts = ["ab", "cd", "ef", "gh"]  # 4 tokens each, estimated so: three fit a batch
    assert await batcher.submit(texts) == ([4] * 4, [[4.0]] * 4)
    await batcher.close()
    assert embed.batches[3:] == [["ab", "cd", "ef"], ["gh"]]


async def test_a_small_request_gets_into_the_next_batch_while_a_large_one_is_embedded():
    embed = Recorder()
    embed.gate.clear()  # the large request's first batch holds the worker while the small one arrives
    batcher = await batcher_of(embed, max_batch_size=4, wait_seconds=0)
    large = [f"passage {i:02d}" for i in range(20)]
    first = asyncio.create_task(batcher.submit(large))
    await until(lambda: batcher._in_batch)
    small = asyncio.create_task(batcher.submit(["hello"]))
    await until(lambda: batcher.queued == 16 + 1)  # queued behind the large one's 16 left
    embed.gate.set()
    assert await small == ([5], [[5.0]])
    assert not first.done()  # answered before the large request, not after all of its texts
    assert await first == embedded(large)
    await batcher.close()
    assert embed.batches[0] == large[:4] and "hello" in embed.batches[1]
    assert [text for batch in embed.batches for text in batch if text != "hello"] == large  # in order


async def test_batches_take_turns_between_requests():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=2, wait_seconds=0)
    holder = asyncio.create_task(batcher.submit(["x"]))
    await until(lambda: batcher._in_batch)
    requests = {name: [f"{name}{i}" for i in range(4)] for name in "abc"}
    tasks = [asyncio.create_task(batcher.submit(texts)) for texts in requests.values()]
    await until(lambda: batcher.queued == 12)  # all three queued before the first of their batches is taken
    embed.gate.set()
    assert await asyncio.gather(*tasks) == [([2] * 4, [[2.0]] * 4)] * 3
    await holder
    await batcher.close()
    # Each request in turn, one text at a time, the next batch going on where the last one stopped.
    assert embed.batches[1:] == [["a0", "b0"], ["c0", "a1"], ["b1", "c1"], ["a2", "b2"], ["c2", "a3"], ["b3", "c3"]]


async def test_a_text_over_the_token_room_left_does_not_block_the_others():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=8, max_batch_tokens=10, wait_seconds=0)
    holder = asyncio.create_task(batcher.submit(["x"]))
    await until(lambda: batcher._in_batch)
    long = asyncio.create_task(batcher.submit(["aaaaaa", "bbbbbbbb"]))
    short = asyncio.create_task(batcher.submit(["c", "d"]))
    await until(lambda: batcher.queued == 4)
    embed.gate.set()
    await asyncio.gather(holder, long, short)
    await batcher.close()
    # "bbbbbbbb" does not fit after "aaaaaa" and "c": it waits for the next batch, where it comes first.
    assert embed.batches[1:] == [["aaaaaa", "c", "d"], ["bbbbbbbb"]]


async def test_a_text_over_its_request_s_limit_refuses_that_request_alone_and_the_rest_of_it_leaves_the_queue():
    embed = Recorder()
    embed.gate.clear()
    sizes: list[tuple[int, int]] = []
    batcher = await batcher_of(embed, max_batch_size=3, wait_seconds=0, on_batch=lambda *size: sizes.append(size))
    holder = asyncio.create_task(batcher.submit(["x"]))
    await until(lambda: batcher._in_batch)
    strict = asyncio.create_task(batcher.submit(["ab", "abcdef", "cd", "ef"], limit=4))
    other = asyncio.create_task(batcher.submit(["abcdefgh", "gh"]))  # no limit: as long as it is
    await until(lambda: batcher.queued == 6)
    embed.gate.set()
    # Its counts up to the text over the limit (zeros after) and no vectors; its last text is never embedded.
    assert await strict == ([2, 6, 0, 0], None)
    assert await other == embedded(["abcdefgh", "gh"])
    await holder
    await batcher.close()
    assert embed.batches[1:] == [["ab", "abcdefgh", "abcdef"], ["gh"]] and batcher.queued == 0
    assert sizes[1] == (2, 10)  # the batch's texts embedded: "abcdef" was not


async def test_a_request_s_cut_goes_with_each_of_its_texts_and_bounds_the_tokens_counted_embedded():
    embed = Recorder()
    embed.gate.clear()
    sizes: list[tuple[int, int]] = []
    batcher = await batcher_of(embed, wait_seconds=0, on_batch=lambda *size: sizes.append(size))
    holder = asyncio.create_task(batcher.submit(["x"]))
    await until(lambda: batcher._in_batch)
    cut = asyncio.create_task(batcher.submit(["abcdef", "ab"], cut=3))
    whole = asyncio.create_task(batcher.submit(["abcd"]))
    await until(lambda: batcher.queued == 3)
    embed.gate.set()
    assert await cut == embedded(["abcdef", "ab"])  # the counts before the cut, as the model process answers
    await asyncio.gather(holder, whole)
    await batcher.close()
    assert embed.batches[1:] == [["abcdef", "abcd", "ab"]] and embed.cuts[1:] == [[3, None, 3]]
    assert sizes[1] == (3, 3 + 4 + 2)  # "abcdef" embedded as its first 3 tokens


async def test_a_full_queue_is_refused():
    embed = Recorder()
    embed.gate.clear()  # the first batch holds the worker, so later texts queue up
    batcher = await batcher_of(embed, max_batch_size=1, max_queued_texts=2, wait_seconds=0)
    first = asyncio.create_task(batcher.submit(["a"]))
    await until(lambda: batcher._in_batch)
    queued = asyncio.create_task(batcher.submit(["b", "c"]))
    await until(lambda: batcher.queued == 2)
    with pytest.raises(QueueFull):
        await batcher.submit(["d"])
    embed.gate.set()
    assert await first == ([1], [[1.0]]) and await queued == ([1, 1], [[1.0], [1.0]])
    await batcher.close()


async def test_a_failed_batch_fails_its_requests_not_the_worker():
    embed = Recorder(fail_on="bad")
    batcher = await batcher_of(embed)
    with pytest.raises(RuntimeError, match="pipeline failed"):
        await batcher.submit(["bad", "good"])
    assert batcher.alive
    assert await batcher.submit(["fine"]) == ([4], [[4.0]])
    await batcher.close()


async def test_a_model_call_that_fails_as_it_is_made_fails_its_request_not_the_worker():
    """The model process's calls are futures written at once: one refused on the spot (the process is starting
    again) raises where it is made, not when awaited."""
    stopped = True

    def embed(texts, _limits, _cuts):
        if stopped:
            raise ConnectionError("the model process is starting again")
        future = asyncio.get_running_loop().create_future()
        future.set_result(embedded(texts))
        return future

    batcher = Batcher(embed, 8, 1000, 100, 0, 100)
    batcher.start()
    with pytest.raises(ConnectionError, match="starting again"):
        await batcher.submit(["a query"])
    stopped = False
    assert batcher.alive and await batcher.submit(["a query"]) == ([7], [[7.0]])
    await batcher.close()


async def test_a_request_whose_client_left_is_not_embedded():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=1, wait_seconds=0)
    running = asyncio.create_task(batcher.submit(["first"]))
    await until(lambda: batcher._in_batch)
    abandoned = asyncio.create_task(batcher.submit(["gone", "also gone"]))
    await until(lambda: batcher.queued == 2)
    abandoned.cancel()
    embed.gate.set()
    await running
    assert await batcher.submit(["next"]) == ([4], [[4.0]])
    await batcher.close()
    assert ["gone"] not in embed.batches and ["also gone"] not in embed.batches


async def test_a_request_whose_client_left_leaves_the_queue_at_once():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=2, wait_seconds=0)
    texts = [f"t{i}" for i in range(10)]
    abandoned = asyncio.create_task(batcher.submit(texts))
    await until(lambda: batcher._in_batch)
    assert batcher.queued == 8
    abandoned.cancel()
    await asyncio.sleep(0)
    assert batcher.queued == 0  # not when the worker next looks: the gauge on /metrics says so now
    embed.gate.set()
    assert await batcher.submit(["next"]) == ([4], [[4.0]])
    await batcher.close()
    assert embed.batches == [["t0", "t1"], ["next"]]


async def test_close_fails_what_still_waits():
    embed = Recorder()
    embed.gate.clear()
    batcher = await batcher_of(embed, max_batch_size=1, wait_seconds=0)
    running = asyncio.create_task(batcher.submit(["first"]))
    waiting = asyncio.create_task(batcher.submit(["second"]))
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
    request = asyncio.ensure_future(batcher.submit(["one"]))
    await until(lambda: batcher._in_batch)  # the batch has left the queue for the pipeline
    closing = asyncio.ensure_future(batcher.close())
    await settle()
    assert not closing.done()  # waits for the pipeline, while this loop still runs
    embed.gate.set()
    await closing
    with pytest.raises(RuntimeError, match="shutting down"):
        await request
