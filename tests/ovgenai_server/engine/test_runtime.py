"""The runtime's side of the engine seam, its engine process left out: what it sends for a request, and that a
request it stops waiting for is aborted in the engine."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from ovgenai_server.engine.messages import Abort, AddGroup, AddRequest
from ovgenai_server.engine.runtime import OpenVINORuntime
from ovgenai_server.engine.types import EngineError, EngineState, GenerationParams, TokenPrompt
from ovgenai_server.model_specs import base_spec
from ovgenai_server.settings import BackendSettings

PROMPT = TokenPrompt([1, 2, 3])


@pytest.fixture
async def runtime():
    served = OpenVINORuntime(base_spec(BackendSettings(), "m", Path("/models/m")), tokenizer=None)
    served._state = EngineState.AVAILABLE  # as the engine process's Ready makes it
    served.sent = []
    served._send = served.sent.append
    yield served
    await served.close()


async def started(runtime: OpenVINORuntime, params: GenerationParams):
    """The request's stream, run until it waits for the engine's first output."""
    stream = runtime.generate(PROMPT, params)
    first = asyncio.create_task(anext(stream))
    while not runtime.sent:
        await asyncio.sleep(0)
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
    runtime._state = EngineState.LOADING
    with pytest.raises(EngineError) as refused:
        await anext(runtime.generate(PROMPT, GenerationParams(max_new_tokens=4)))
    assert refused.value.retryable and runtime.sent == []


async def test_a_runtime_never_started_closes():
    unstarted = OpenVINORuntime(base_spec(BackendSettings(), "m", Path("/models/m")), tokenizer=None)
    await unstarted.close()
    # A request that found it before it was unloaded or replaced is told to retry.
    assert unstarted.health().state is EngineState.FAILED and "retry" in unstarted.health().message
