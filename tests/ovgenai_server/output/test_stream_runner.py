"""The stream runner on the fake model: a writer's frames in order, its end once, and a failure after the headers in
the writer's own terms (the text writer raises, for fronts without an error format)."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.api import completions
from ovgenai_server.api.protocol import CompletionRequest
from ovgenai_server.engine.contract.types import SequenceDelta
from ovgenai_server.output.stream_runner import stream, text_stream
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state


class Recorder:
    rid = "r-1"

    def delta(self, delta: SequenceDelta) -> list[str]:
        return [f"{delta.index}:{delta.text}:{delta.finish_reason}"]

    def end(self, counted: dict[str, int]) -> list[str]:
        return [f"end:{counted['completion_tokens']}"]

    def error(self, message: str, kind: ErrorKind) -> list[str]:
        return [f"error:{kind.name}:{message}"]


async def prepared(runtime: FakeRuntime, **fields):
    state = fake_state(fake_model(runtime))
    [prep] = await completions.prepare(state, CompletionRequest(prompt="one", max_tokens=5, **fields))
    return state, prep


async def test_each_delta_then_the_end_with_the_usage():
    state, prep = await prepared(FakeRuntime())
    items = [item async for item in stream(prep, state.metrics, Recorder())]
    assert items == ["0:Hello:None", "0:,:None", "0: world:stop", "end:3"]


async def test_a_failure_after_the_headers_is_the_writer_s_error():
    state, prep = await prepared(FakeRuntime(fail_after=1))
    items = [item async for item in stream(prep, state.metrics, Recorder())]
    assert items[0] == "0:Hello:None" and items[-1].startswith("error:UNAVAILABLE:")


async def test_text_stream_raises_for_fronts_without_an_error_format():
    state, prep = await prepared(FakeRuntime(fail_after=1))
    texts = []
    with pytest.raises(APIError):
        async for text in text_stream(prep, state.metrics):
            texts.append(text)
    assert texts == ["Hello"]
