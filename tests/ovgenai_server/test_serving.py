"""Serving on the fake engine, without HTTP: what a request's result holds, what the metrics count, and that
closing a stream ends its generation."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.protocol import ChatCompletionRequest, CompletionRequest
from ovgenai_server.metrics import ServerMetrics
from ovgenai_server.serving import Serving
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeEngine

MESSAGES = [{"role": "user", "content": "hi there"}]


def serving(engine: FakeEngine) -> tuple[Serving, CollectorRegistry]:
    registry = CollectorRegistry()
    engines = {engine.name: engine}
    return Serving(engines, BackendSettings(), ServerMetrics(registry, lambda: engines.values())), registry


def counted(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {"model_name": "fake-model", **labels}) or 0.0


async def test_a_chat_answer_with_its_usage_and_counters():
    service, registry = serving(FakeEngine())
    request = ChatCompletionRequest(messages=MESSAGES, max_tokens=10)
    reply = await service.chat(request, await service.prepare_chat(request))
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Hello, world"}
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] == 3
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + 3
    assert counted(registry, "ovgenai:generation_tokens_total") == 3
    assert counted(registry, "ovgenai:request_success_total", finished_reason="stop") == 1


async def test_n_choices_of_every_prompt_of_a_completion():
    service, _ = serving(FakeEngine())
    request = CompletionRequest(prompt=["one two", "three"], n=2, max_tokens=2, temperature=1.0)
    reply = await service.completion(request, await service.prepare_completion(request))
    assert [choice["index"] for choice in reply["choices"]] == [0, 1, 2, 3]
    assert {choice["text"] for choice in reply["choices"]} == {"Hello,"}
    assert {choice["finish_reason"] for choice in reply["choices"]} == {"length"}


async def test_an_engine_failure_is_an_error_and_counted():
    engine = FakeEngine(fail_after=1)
    service, registry = serving(engine)
    request = ChatCompletionRequest(messages=MESSAGES)
    with pytest.raises(APIError) as raised:
        await service.chat(request, await service.prepare_chat(request))
    assert raised.value.kind is ErrorKind.UNAVAILABLE and "retry" in raised.value.message
    assert counted(registry, "ovgenai:request_failure_total") == 1 and engine.active == 0


async def test_closing_a_stream_ends_its_generation():
    engine = FakeEngine(pieces=["a"] * 20)
    service, _ = serving(engine)
    request = ChatCompletionRequest(messages=MESSAGES, stream=True)
    stream = service.chat_stream(request, await service.prepare_chat(request))
    first = await anext(stream)
    assert first.startswith(b"data: ") and engine.active == 1
    await stream.aclose()  # what the router does when the client leaves: the generation is aborted
    assert engine.active == 0


async def test_text_stream_raises_for_fronts_without_an_error_format():
    service, _ = serving(FakeEngine(fail_after=1))
    prep = (await service.prepare_completion(CompletionRequest(prompt="one", max_tokens=5)))[0]
    texts = []
    with pytest.raises(APIError):
        async for text in service.text_stream(prep):
            texts.append(text)
    assert texts == ["Hello"]


async def test_a_chat_template_refusal_is_a_400_without_the_library_s_source_paths():
    class Refusing(FakeEngine):
        def apply_chat_template(self, *args, **kwargs):  # noqa: ARG002 - refuses whatever it is given
            raise RuntimeError("Exception from /home/jenkins/agent/workspace/b/repos/openvino.genai/src/cpp/src/"
                               "json_container.cpp:97:\nConversation roles must alternate user/assistant")

    service, _ = serving(Refusing())
    with pytest.raises(APIError) as refused:
        await service.prepare_chat(ChatCompletionRequest(model="fake-model",
                                                         messages=[{"role": "user", "content": "hi"}]))
    assert refused.value.status == 400 and refused.value.param == "messages"
    assert refused.value.message.endswith("Conversation roles must alternate user/assistant")
    assert "jenkins" not in refused.value.message and ".cpp" not in refused.value.message
