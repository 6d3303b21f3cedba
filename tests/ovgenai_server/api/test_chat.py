"""Chat completions on the fake model, without HTTP: what an answer holds, what the metrics count, and that closing a
stream ends its generation."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.api import chat
from ovgenai_server.api.protocol import ChatCompletionRequest
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state

MESSAGES = [{"role": "user", "content": "hi there"}]


def counted(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {"model_name": "fake-model", **labels}) or 0.0


async def test_a_chat_answer_with_its_usage_and_counters():
    registry = CollectorRegistry()
    state = fake_state(metrics=registry)
    request = ChatCompletionRequest(messages=MESSAGES, max_tokens=10)
    reply = await chat.answer(request, await chat.prepare(state, request), state.metrics)
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Hello, world"}
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] == 3
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + 3
    assert counted(registry, "ovgenai:generation_tokens_total") == 3
    assert counted(registry, "ovgenai:request_success_total", finished_reason="stop") == 1


async def test_an_engine_failure_is_an_error_and_counted():
    runtime, registry = FakeRuntime(fail_after=1), CollectorRegistry()
    state = fake_state(fake_model(runtime), metrics=registry)
    request = ChatCompletionRequest(messages=MESSAGES)
    with pytest.raises(APIError) as raised:
        await chat.answer(request, await chat.prepare(state, request), state.metrics)
    assert raised.value.kind is ErrorKind.UNAVAILABLE and "retry" in raised.value.message
    assert counted(registry, "ovgenai:request_failure_total") == 1 and runtime.active == 0


async def test_closing_a_stream_ends_its_generation():
    runtime = FakeRuntime(pieces=["a"] * 20)
    state = fake_state(fake_model(runtime))
    request = ChatCompletionRequest(messages=MESSAGES, stream=True)
    stream = chat.streamed(request, await chat.prepare(state, request), state.metrics)
    first = await anext(stream)
    assert first.startswith(b"data: ") and runtime.active == 1
    await stream.aclose()  # what the router does when the client leaves: the generation is aborted
    assert runtime.active == 0


async def test_tools_on_a_template_without_them_are_described_and_the_answer_held_to_their_form():
    """As llama.cpp's generic format: the tools in the system message, the answer JSON calls or a response."""
    runtime = FakeRuntime(pieces=['{"tool_calls": [{"name": "f", "parameters": {}}]}'])
    state = fake_state(fake_model(runtime, max_context=4096))
    request = ChatCompletionRequest(messages=MESSAGES, tools=[{"type": "function", "function": {"name": "f"}}])
    prep = await chat.prepare(state, request)
    [(prompt_ids, params)] = [(prep.prompt_ids, prep.params)]
    assert params.structured_output.param == "tools" and '"response"' in params.structured_output.value
    reply = await chat.answer(request, prep, state.metrics)
    message = reply["choices"][0]["message"]
    assert message["content"] is None and message["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    assert reply["choices"][0]["finish_reason"] == "tool_calls" and len(prompt_ids) > 20  # the description
