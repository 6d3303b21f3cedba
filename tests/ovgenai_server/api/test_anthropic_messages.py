"""Anthropic's Messages API on the fake model, over the app's routes: a message whole and streamed, tool use, stop
sequences and stop reasons, token counts, and what is refused."""

from __future__ import annotations

import json

import httpx

from ovgenai_server.app import create_app
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeRuntime, fake_model
from tests.support.replies import named_events

HI = [{"role": "user", "content": "hi there"}]
WEATHER = {"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def client_of(runtime: FakeRuntime | None = None) -> httpx.AsyncClient:
    app = create_app(BackendSettings(), [fake_model(runtime or FakeRuntime(), max_context=4096)])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_a_message_with_its_text_stop_reason_and_usage():
    runtime = FakeRuntime()
    async with client_of(runtime) as client:
        reply = await client.post("/v1/messages", json={"max_tokens": 20, "messages": HI, "system": "Be brief.",
                                                         "temperature": 0.5})
    body = reply.json()
    assert reply.status_code == 200, body
    assert body["type"] == "message" and body["role"] == "assistant" and body["id"].startswith("msg_")
    assert body["content"] == [{"type": "text", "text": "Hello, world"}]
    assert body["stop_reason"] == "end_turn" and body["stop_sequence"] is None
    assert body["usage"]["output_tokens"] == 3 and body["usage"]["input_tokens"] > 0
    assert runtime.calls[0][1].temperature == 0.5


async def test_the_stop_sequence_it_ended_at_and_max_tokens_are_said():
    async with client_of(FakeRuntime(pieces=["Hello", ",", " world"])) as client:
        cut = (await client.post("/v1/messages", json={"max_tokens": 2, "messages": HI})).json()
    assert cut["stop_reason"] == "max_tokens"
    runtime = FakeRuntime(pieces=["Hello"])
    runtime.stop_reason = ", w"  # as the engine's runtime says where it cut the text (engine/api_process/stop_text.py)
    async with client_of(runtime) as client:
        stopped = (await client.post("/v1/messages", json={"max_tokens": 20, "messages": HI,
                                                           "stop_sequences": [", w"]})).json()
        streamed = named_events((await client.post("/v1/messages", json={
            "max_tokens": 20, "messages": HI, "stop_sequences": [", w"], "stream": True})).text)
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", ", w")
    assert streamed[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": ", w"}


async def test_a_stream_sends_anthropics_events_in_order():
    async with client_of() as client:
        reply = await client.post("/v1/messages", json={"max_tokens": 20, "messages": HI, "stream": True})
    events = named_events(reply.text)
    assert [e["type"] for e in events] == ["message_start", "content_block_start", "content_block_delta",
                                           "content_block_delta", "content_block_delta", "content_block_stop",
                                           "message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] > 0 and events[0]["message"]["content"] == []
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == "Hello, world"
    assert events[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[-2]["usage"]["output_tokens"] == 3


async def test_a_failure_mid_stream_is_an_error_event():
    async with client_of(FakeRuntime(fail_after=1)) as client:
        events = named_events((await client.post("/v1/messages", json={"max_tokens": 9, "messages": HI,
                                                                     "stream": True})).text)
    assert events[-1]["type"] == "error" and events[-1]["error"]["type"] == "overloaded_error"


async def test_tool_use_comes_back_as_a_block_and_its_result_round_trips():
    runtime = FakeRuntime(pieces=['{"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}'])
    async with client_of(runtime) as client:
        body = (await client.post("/v1/messages", json={"max_tokens": 60, "messages": HI, "tools": [WEATHER],
                                                         "tool_choice": {"type": "any"}})).json()
        [use] = body["content"]
        assert use["type"] == "tool_use" and use["name"] == "weather" and use["input"] == {"city": "Oslo"}
        assert body["stop_reason"] == "tool_use"
        streamed = named_events((await client.post("/v1/messages", json={
            "max_tokens": 60, "messages": HI, "tools": [WEATHER], "tool_choice": {"type": "any"},
            "stream": True})).text)
        runtime.pieces = ["Sunny"]
        follow = await client.post("/v1/messages", json={"max_tokens": 20, "tools": [WEATHER], "messages": [
            *HI, {"role": "assistant", "content": body["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "12 C"}]}]})
    start = next(e for e in streamed if e["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use" and start["content_block"]["name"] == "weather"
    partial = "".join(e["delta"]["partial_json"] for e in streamed if e["type"] == "content_block_delta")
    assert json.loads(partial) == {"city": "Oslo"}
    assert follow.status_code == 200 and follow.json()["content"][0]["text"] == "Sunny"


async def test_count_tokens_is_the_prompt_the_model_would_read():
    runtime = FakeRuntime()
    async with client_of(runtime) as client:
        counted = (await client.post("/v1/messages/count_tokens", json={"messages": HI})).json()
        answered = (await client.post("/v1/messages", json={"max_tokens": 5, "messages": HI})).json()
    assert counted == {"input_tokens": answered["usage"]["input_tokens"]} and len(runtime.calls) == 1


async def test_refusals_name_what_they_refuse():
    async with client_of() as client:
        unknown = await client.post("/v1/messages", json={"max_tokens": 5, "messages": HI, "mcp_servers": []})
        missing = await client.post("/v1/messages", json={"messages": HI})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "mcp_servers"
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "max_tokens"


async def test_a_forced_tool_call_ends_in_tool_use_whole_and_streamed():
    """A tool_choice of one named tool ended with end_turn (chat says "stop" for a forced call, as OpenAI does): a
    client looping on stop_reason "tool_use" never ran the tool."""
    runtime = FakeRuntime(pieces=['{"city": "Oslo"}'])
    forced = {"max_tokens": 60, "messages": HI, "tools": [WEATHER], "tool_choice": {"type": "tool", "name": "weather"}}
    async with client_of(runtime) as client:
        body = (await client.post("/v1/messages", json=forced)).json()
        streamed = named_events((await client.post("/v1/messages", json={**forced, "stream": True})).text)
    assert body["content"][0]["type"] == "tool_use" and body["stop_reason"] == "tool_use", body
    [delta] = [e for e in streamed if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "tool_use"


async def test_stop_sequences_past_four_and_usage_without_unmeasured_cache_counts():
    async with client_of() as client:
        many = await client.post("/v1/messages", json={"max_tokens": 5, "messages": HI,
                                                        "stop_sequences": [f"END{i}" for i in range(6)]})
        past = await client.post("/v1/messages", json={"max_tokens": 5, "messages": HI,
                                                        "stop_sequences": [f"END{i}" for i in range(65)]})
    assert many.status_code == 200, many.text
    assert set(many.json()["usage"]) == {"input_tokens", "output_tokens"}  # the engine measures no cache reads
    assert past.status_code == 400 and past.json()["error"]["param"] == "stop_sequences"
