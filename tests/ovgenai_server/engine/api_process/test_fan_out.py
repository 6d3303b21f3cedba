"""n choices from a prompt-lookup model: n one-sequence requests merged into one, each as its own choice."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from ovgenai_server.engine.api_process.fan_out import choices, fan_out, merge
from ovgenai_server.engine.contract.types import EngineError, GenerationParams, RequestOutput, SequenceDelta, TextPrompt
from tests.support.waiting import until

# A vision-language request: each of the n requests gets the whole prompt, text and images.
PROMPT = TextPrompt("<ov_genai_image_0> hi", [1, 2, 3], ())


def fanned(engine, params: GenerationParams):
    """The n one-sequence requests of `params`, merged as the runtime merges them."""
    return fan_out([engine.generate(PROMPT, one) for one in choices(params)], len(PROMPT.token_ids))


class OneSequenceEngine:
    """Answers each one-sequence request with its seed as text, in two steps; the request seeded `fail` fails."""

    def __init__(self, fail: int | None = None):
        self.fail = fail
        self.closed: list[int | None] = []
        self.params: list[GenerationParams] = []

    async def generate(self, prompt, params):
        assert params.n == 1 and prompt == PROMPT
        prompt_ids = prompt.token_ids
        self.params.append(params)
        try:
            yield RequestOutput([SequenceDelta(0, f"s{params.seed}", 1)], False, len(prompt_ids))
            await asyncio.sleep(0)
            if params.seed == self.fail:
                raise EngineError("engine stopped", retryable=True)
            yield RequestOutput([SequenceDelta(0, ".", 1, "stop")], True, len(prompt_ids))
        finally:
            self.closed.append(params.seed)


async def collect(engine, params) -> list[RequestOutput]:
    return [output async for output in fanned(engine, params)]


async def test_each_request_is_one_choice_seeded_in_turn():
    engine = OneSequenceEngine()
    outputs = await collect(engine, GenerationParams(max_new_tokens=4, n=3, seed=2**64 - 1, num_assistant_tokens=5))
    texts: dict[int, str] = {}
    for output in outputs:
        for delta in output.deltas:
            texts[delta.index] = texts.get(delta.index, "") + delta.text
    assert sorted(engine.closed) == [0, 1, 2**64 - 1]  # seed + i, wrapping as the engine's unsigned seed does
    assert texts == {0: f"s{2**64 - 1}.", 1: "s0.", 2: "s1."}
    assert [output.finished for output in outputs].count(True) == 1 and outputs[-1].finished


async def test_a_failing_choice_fails_the_request_and_stops_the_others():
    engine = OneSequenceEngine(fail=8)
    with pytest.raises(EngineError):
        await collect(engine, GenerationParams(max_new_tokens=4, n=3, seed=7))
    assert sorted(engine.closed) == [7, 8, 9]  # every request closed (aborted in the engine)


class EndlessEngine:
    """Gives each request one piece, then generates until it is closed (aborted)."""

    def __init__(self):
        self.started: list[int | None] = []
        self.closed: list[int | None] = []

    async def generate(self, prompt, params):
        prompt_ids = prompt.token_ids
        self.started.append(params.seed)
        try:
            yield RequestOutput([SequenceDelta(0, "once", 1)], False, len(prompt_ids))
            await asyncio.Event().wait()
        finally:
            self.closed.append(params.seed)


PARAMS = GenerationParams(max_new_tokens=4, n=3, seed=1)


async def test_closing_the_merged_stream_aborts_every_request():
    """A client that disconnects closes the stream: no request of the n may be left generating."""
    engine = EndlessEngine()
    outputs = fanned(engine, PARAMS)
    await anext(outputs)
    await until(lambda: len(engine.started) == 3)
    await outputs.aclose()
    assert sorted(engine.closed) == [1, 2, 3]


async def test_cancelling_the_consumer_aborts_every_request():
    """A disconnect may instead cancel the task that reads the stream (a unary request's handler)."""
    engine = EndlessEngine()

    async def consume() -> None:
        async with contextlib.aclosing(fanned(engine, PARAMS)) as outputs:
            async for _ in outputs:
                pass

    task = asyncio.create_task(consume())
    await until(lambda: len(engine.started) == 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(engine.closed) == [1, 2, 3]


class CountingEngine:
    """As OneSequenceEngine, but a finished request carries the prompt length the engine computed (a vision
    request's images included: engine/engine_process/loop.py), and the request seeded 0 finishes first."""

    async def generate(self, prompt, params):
        prompt_ids = prompt.token_ids
        yield RequestOutput([SequenceDelta(0, "a", 1)], False, len(prompt_ids))
        for _ in range(params.seed * 3):  # the later seeds finish later
            await asyncio.sleep(0)
        yield RequestOutput([SequenceDelta(0, "b", 1)], False, len(prompt_ids))
        yield RequestOutput([SequenceDelta(0, ".", 1, "stop")], True, 42)


async def test_the_engine_s_prompt_count_of_a_finished_choice_is_kept():
    outputs = [output async for output in fanned(CountingEngine(),
                                                  GenerationParams(max_new_tokens=3, n=3, seed=0))]
    assert outputs[-1].finished and outputs[-1].prompt_tokens == 42
    assert [output.prompt_tokens for output in outputs[:2]] == [3, 3]  # before any choice finished: the text's


def test_outputs_merged_for_a_slow_client_keep_the_stop_string_matched():
    first = RequestOutput([SequenceDelta(0, "The", 1)], finished=False, prompt_tokens=3)
    last = RequestOutput([SequenceDelta(0, " sea", 1, "stop", stop_reason=" is")], finished=True, prompt_tokens=3)
    [delta] = merge(first, last).deltas
    assert (delta.text, delta.finish_reason, delta.stop_reason) == ("The sea", "stop", " is")
