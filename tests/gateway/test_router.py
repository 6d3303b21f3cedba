"""The chat routes on the real app over ASGI, the LLM and embedding services on MockTransport: a question's checks
(validation.py) are 400s that name the field, the two chat bodies differ only in their stream default, and the
health of each dependency is reported. The same against the real services: system/test_gateway.py."""

from __future__ import annotations

import pytest

from tests.gateway.fake_upstreams import FakeUpstreams, gateway


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": "  "}]}, "messages"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "messages"),
    ({"messages": "q", "index_name": "other"}, "index_name"),
    ({"messages": "q", "search_type": "similarity_distance_threshold"}, "distance_threshold"),
    ({"messages": "q", "chat_template": "no placeholder"}, "chat_template"),
])
async def test_a_bad_question_is_a_400_before_any_upstream_call(tmp_path, body, param):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        reply = await http.post("/v1/chatqna", json=body)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
    assert upstreams.chats == [] and upstreams.embedded == []


async def test_chatqna_streams_by_default_and_openai_chat_does_not(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams, max_tokens=7) as http:
        streamed = await http.post("/v1/chatqna", json={"messages": "Who?"})
        unary = await http.post("/v1/chat/completions", json={"model": "chatqna", "messages": [
            {"role": "user", "content": "Who?"}], "unknown_field": 1})  # ignored, as OPEA's clients expect
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text.rstrip().endswith("data: [DONE]")
    assert unary.json()["choices"][0]["message"]["content"] == upstreams.answer
    assert all(chat.get("max_completion_tokens", chat.get("max_tokens")) == 7 for chat in upstreams.chats)


async def test_health_names_each_dependency(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        ready = (await http.get("/v1/health_check")).json()["Dependencies"]
        upstreams.down.add("llm.test")
        failing = await http.get("/health")
    assert ready["embedding"] == "ok" and ready["llm"] == "ok" and ready["rerank"].startswith("off")
    assert failing.status_code == 503 and "llm: unreachable (ConnectError)" in failing.json()["error"]["message"]
    assert "llm.test" not in failing.text


async def test_models_lists_the_pipeline(tmp_path):
    async with gateway(tmp_path, pipeline_name="rag") as http:
        assert (await http.get("/v1/models")).json()["data"][0]["id"] == "rag"
