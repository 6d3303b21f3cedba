"""The runtime's side of the engine seam, its engine process left out: what it sends for a request, and that a
request it stops waiting for is aborted in the engine."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from ovgenai_server.engine.api_process.runtime import OpenVINORuntime
from ovgenai_server.engine.contract.messages import Abort, AddGroup, AddRequest, RequestStep, SeqOutput, StepOutputs
from ovgenai_server.engine.contract.types import EngineError, EngineState, GenerationParams, RequestTimings, TokenPrompt
from ovgenai_server.models.specs import base_spec
from ovgenai_server.settings import BackendSettings
from tests.support.waiting import until

PROMPT = TokenPrompt([1, 2, 3])
WORDS = {10: "The", 11: " sea", 12: " is", 13: " blue"}  # token id -> text


class WordTokenizer:
    """A tokenizer of whole words, as the runtime decodes a step's tokens (one call for all its sequences)."""

    @staticmethod
    def decode(batch: list[list[int]]) -> list[str]:
        return ["".join(WORDS[token] for token in ids) for ids in batch]


@pytest.fixture
async def runtime():
    served = OpenVINORuntime(base_spec(BackendSettings(), "m", Path("/models/m")), tokenizer=None)
    served.supervisor.ready()  # as the engine process's Ready makes it
    served.sent = []
    served._send = served.sent.append
    yield served
    await served.close()


async def started(runtime: OpenVINORuntime, params: GenerationParams):
    """The request's stream, run until it waits for the engine's first output."""
    stream = runtime.generate(PROMPT, params)
    first = asyncio.create_task(anext(stream))
    await until(lambda: runtime.sent)
    return stream, first


async def test_n_sampled_choices_reach_the_engine_in_one_message_and_are_aborted_together(runtime):
    """One message: the engine adds them in one step whatever the load, so a seeded request reproduces."""
    stream, first = await started(runtime, GenerationParams(max_new_tokens=4, n=3, seed=5, do_sample=True))
    [group] = runtime.sent
    assert isinstance(group, AddGroup) and [add.params.seed for add in group.requests] == [5, 6, 7]
    assert {add.params.n for add in group.requests} == {1} and runtime.in_flight() == 3
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await stream.aclose()  # the client left
    aborted = {message.request_id for message in runtime.sent[1:] if isinstance(message, Abort)}
    assert aborted == {add.request_id for add in group.requests} and runtime.in_flight() == 0


async def test_one_choice_is_one_request(runtime):
    stream, first = await started(runtime, GenerationParams(max_new_tokens=4))
    [add] = runtime.sent
    assert isinstance(add, AddRequest) and add.prompt == PROMPT
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await stream.aclose()
    assert runtime.sent[1:] == [Abort(add.request_id)]


async def test_a_request_that_could_not_be_sent_is_forgotten(runtime):
    def full(_command):
        raise OSError("queue full")

    runtime._send = full
    with pytest.raises(OSError):
        await anext(runtime.generate(PROMPT, GenerationParams(max_new_tokens=4, n=2, do_sample=True)))
    assert runtime.in_flight() == 0


async def test_a_model_not_yet_loaded_is_a_retryable_error(runtime):
    runtime.supervisor.state = EngineState.LOADING
    with pytest.raises(EngineError) as refused:
        await anext(runtime.generate(PROMPT, GenerationParams(max_new_tokens=4)))
    assert refused.value.retryable and runtime.sent == []


async def test_a_runtime_never_started_closes():
    unstarted = OpenVINORuntime(base_spec(BackendSettings(), "m", Path("/models/m")), tokenizer=None)
    await unstarted.close()
    # A request that found it before it was unloaded or replaced is told to retry.
    assert unstarted.health().state is EngineState.FAILED and "retry" in unstarted.health().message


def engine_step(request_id: int, ids: list[int], finished: bool = False, **fields) -> StepOutputs:
    seq = SeqOutput(0, ids, "length" if finished else None, None)
    return StepOutputs([RequestStep(request_id, [seq], finished, **fields)], running=1, waiting=0, kv_cache_usage=0)


async def test_a_request_ends_where_a_stop_string_begins_and_is_aborted_in_the_engine(runtime):
    """The engine is not told stop strings (it cut " " off with the token after it, never saying it matched): the
    runtime ends the request at the string, names it, times it from its first output and aborts it."""
    runtime._tokenizer = WordTokenizer()
    stream, first = await started(runtime, GenerationParams(max_new_tokens=8, stop=(" is",)))
    [add] = runtime.sent
    runtime._dispatch(engine_step(add.request_id, [10], timings=RequestTimings(0.25, 0.5, 0.0)))
    outputs = [await first]
    runtime._dispatch(engine_step(add.request_id, [11, 12]))
    runtime._dispatch(engine_step(add.request_id, [13], finished=True))  # made before the abort reached it
    outputs += [output async for output in stream]
    deltas = [delta for output in outputs for delta in output.deltas]
    assert "".join(delta.text for delta in deltas) == "The sea"
    assert (deltas[-1].finish_reason, deltas[-1].stop_reason) == ("stop", " is")
    assert sum(delta.token_count for delta in deltas) == 3 and outputs[-1].finished
    assert outputs[0].timings is None  # a first output's times are the runtime's to keep, not a finished request's
    timings = outputs[-1].timings
    assert (timings.queue, timings.prefill) == (0.25, 0.5) and timings.decode >= 0
    assert runtime.sent[1:] == [Abort(add.request_id)] and runtime.in_flight() == 0
