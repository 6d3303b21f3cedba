"""The Responses API on the fake model, over the app's routes: whole and streamed responses, tools, text formats,
previous_response_id and the store, and what is refused."""

from __future__ import annotations

import json

import httpx
import pytest

from ovgenai_server.app import create_app
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeRuntime, fake_model
from tests.support.replies import named_events


def client_of(runtime: FakeRuntime | None = None, **settings) -> httpx.AsyncClient:
    model = fake_model(runtime or FakeRuntime(), max_context=4096)
    app = create_app(BackendSettings(**settings), [model])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_a_response_is_the_chat_answer_as_a_message_item_with_usage():
    runtime = FakeRuntime()
    async with client_of(runtime) as client:
        reply = await client.post("/v1/responses", json={"input": "hi there", "instructions": "Be brief.",
                                                          "max_output_tokens": 20, "temperature": 0.5})
    body = reply.json()
    assert reply.status_code == 200, body
    assert body["object"] == "response" and body["id"].startswith("resp_") and body["status"] == "completed"
    [message] = body["output"]
    assert message["type"] == "message" and message["role"] == "assistant" and message["status"] == "completed"
    assert message["content"][0]["type"] == "output_text" and message["content"][0]["text"] == "Hello, world"
    assert body["usage"]["output_tokens"] == 3
    assert body["usage"]["total_tokens"] == body["usage"]["input_tokens"] + 3
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 20 and body["temperature"] == 0.5
    params = runtime.calls[0][1]
    assert params.max_new_tokens == 20 and params.temperature == pytest.approx(0.5)


async def test_a_response_cut_by_max_output_tokens_is_incomplete():
    async with client_of() as client:
        body = (await client.post("/v1/responses", json={"input": "hi", "max_output_tokens": 2})).json()
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_a_streamed_response_sends_the_sdks_events_in_order():
    async with client_of() as client:
        reply = await client.post("/v1/responses", json={"input": "hi", "stream": True})
    events = named_events(reply.text)
    kinds = [event["type"] for event in events]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                     "response.output_text.delta", "response.output_text.done", "response.content_part.done",
                     "response.output_item.done", "response.completed"]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "Hello, world"
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["output"][0]["content"][0]["text"] == "Hello, world"
    assert final["usage"]["output_tokens"] == 3 and events[0]["response"]["status"] == "in_progress"


async def test_a_failure_mid_stream_is_a_failed_response():
    async with client_of(FakeRuntime(fail_after=1)) as client:
        events = named_events((await client.post("/v1/responses", json={"input": "hi", "stream": True})).text)
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"


async def test_previous_response_id_continues_the_conversation_without_its_instructions():
    runtime = FakeRuntime()
    async with client_of(runtime) as client:
        first = (await client.post("/v1/responses", json={"input": "first question", "instructions": "Be brief."}))
        second = await client.post("/v1/responses",
                                   json={"input": "second", "previous_response_id": first.json()["id"]})
    assert second.status_code == 200, second.json()
    assert second.json()["previous_response_id"] == first.json()["id"]
    # The fake template writes "role: content" lines, the fake tokenizer a token per word, its id the word's length.
    prompt = runtime.calls[1][0]
    assert prompt == [len(w) for w in "user: first question\nassistant: Hello, world\nuser: second".split()]


async def test_stored_responses_are_read_and_deleted_and_unknown_ones_are_404():
    async with client_of() as client:
        created = (await client.post("/v1/responses", json={"input": "hi"})).json()
        got = await client.get(f"/v1/responses/{created['id']}")
        assert got.status_code == 200 and got.json() == created
        deleted = await client.delete(f"/v1/responses/{created['id']}")
        assert deleted.json() == {"id": created["id"], "object": "response", "deleted": True}
        again = await client.get(f"/v1/responses/{created['id']}")
        follow = await client.post("/v1/responses", json={"input": "hi", "previous_response_id": created["id"]})
        unstored = (await client.post("/v1/responses", json={"input": "hi", "store": False})).json()
        missing = await client.get(f"/v1/responses/{unstored['id']}")
    assert again.status_code == 404 and again.json()["error"]["type"] == "not_found_error"
    assert follow.status_code == 404 and follow.json()["error"]["param"] == "previous_response_id"
    assert missing.status_code == 404


async def test_the_store_keeps_at_most_its_size():
    async with client_of(responses_store_size=1) as client:
        first = (await client.post("/v1/responses", json={"input": "hi"})).json()
        await client.post("/v1/responses", json={"input": "hi"})
        assert (await client.get(f"/v1/responses/{first['id']}")).status_code == 404


async def test_a_function_tool_call_comes_back_as_a_function_call_item_and_its_output_round_trips():
    runtime = FakeRuntime(pieces=['{"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}'])
    tool = {"type": "function", "name": "weather", "parameters": {"type": "object",
                                                                    "properties": {"city": {"type": "string"}}}}
    async with client_of(runtime) as client:
        body = (await client.post("/v1/responses", json={"input": "weather?", "tools": [tool],
                                                          "tool_choice": "required"})).json()
        [call] = body["output"]
        assert call["type"] == "function_call" and call["name"] == "weather"
        assert json.loads(call["arguments"]) == {"city": "Oslo"} and call["call_id"]
        runtime.pieces = ["Sunny"]
        follow = await client.post("/v1/responses", json={
            "previous_response_id": body["id"], "tools": [tool],
            "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "12 C"}]})
    assert follow.status_code == 200, follow.json()
    assert follow.json()["output"][0]["content"][0]["text"] == "Sunny"


async def test_a_json_schema_text_format_is_held_by_the_grammar():
    runtime = FakeRuntime(pieces=['{"a": 1}'])
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    async with client_of(runtime) as client:
        reply = await client.post("/v1/responses", json={"input": "hi", "text": {"format": {
            "type": "json_schema", "name": "thing", "schema": schema, "strict": True}}})
    assert reply.status_code == 200, reply.json()
    assert reply.json()["text"]["format"]["schema"] == schema
    structured = runtime.calls[0][1].structured_output
    assert structured is not None and json.loads(structured.value)["properties"] == schema["properties"]


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools.0"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input"),
    ({"input": "hi", "truncation": "auto"}, "truncation"),
    ({"input": "hi", "background": True}, "background"),
    ({"input": "hi", "background": 0}, "background"),  # 0 is no boolean
    ({"input": "hi", "include": ["message.output_text.logprobs"]}, "include.0"),
    ({"input": "hi", "conversation": "conv_1"}, "conversation"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input"),
])
async def test_what_is_not_supported_is_a_400_naming_it(body, param):
    async with client_of() as client:
        reply = await client.post("/v1/responses", json=body)
    assert reply.status_code == 400, reply.json()
    assert reply.json()["error"]["param"].startswith(param), reply.json()


async def test_an_input_of_too_many_items_is_a_400_saying_the_bound():
    async with client_of() as http:
        reply = await http.post("/v1/responses", json={"input": [{"role": "user", "content": "x"}] * 2049})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "input"
    assert "at most 2048 input items" in reply.json()["error"]["message"]
