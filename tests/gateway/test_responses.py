"""The gateway's Responses API on the real app over ASGI, its LLM and embedding services faked: the answer from the
documents with their citations, whole and streamed, the conversation continued by previous_response_id, and what a
retrieval pipeline does not take refused before any upstream call."""

from __future__ import annotations

import pytest

from tests.gateway.fake_upstreams import FakeUpstreams, gateway
from tests.support.replies import stream_events


async def ingest(http) -> None:
    reply = await http.post("/v1/dataprep/ingest", data={"text": ["Fitch is a purple heron."], "name": ["fitch.txt"]})
    assert reply.status_code == 200, reply.text


async def test_an_answer_cites_the_documents_it_was_given_from(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        await ingest(http)
        reply = await http.post("/v1/responses", json={"input": "Who is Fitch?", "instructions": "Be brief.",
                                                        "max_output_tokens": 30})
    body = reply.json()
    assert reply.status_code == 200, body
    [message] = body["output"]
    text = message["content"][0]
    assert text["text"] == upstreams.answer and body["status"] == "completed"
    assert text["annotations"] == [{"type": "file_citation", "file_id": "fitch.txt", "filename": "fitch.txt",
                                    "index": len(upstreams.answer)}]
    assert body["sources"][0]["text"] == "Fitch is a purple heron." and body["usage"]["output_tokens"] == 5
    sent = upstreams.chats[-1]
    assert sent["messages"][0]["role"] == "system" and sent["messages"][0]["content"].startswith("Be brief.")
    assert sent.get("max_completion_tokens", sent.get("max_tokens")) == 30


async def test_a_stream_sends_the_events_and_ends_with_the_cited_response(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        await ingest(http)
        reply = await http.post("/v1/responses", json={"input": "Who is Fitch?", "stream": True})
    events = stream_events(reply.text)
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    final = events[-1]["response"]
    assert deltas == final["output"][0]["content"][0]["text"]
    assert deltas == upstreams.answer.replace(" ", "")  # the fake LLM streams its answer's words without spaces
    assert final["output"][0]["content"][0]["annotations"][0]["file_id"] == "fitch.txt"
    assert final["usage"]["output_tokens"] == 5 and final["sources"][0]["document"] == "fitch.txt"


async def test_previous_response_id_carries_the_conversation_and_the_store_reads_and_deletes(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        first = (await http.post("/v1/responses", json={"input": "Who is Fitch?"})).json()
        second = await http.post("/v1/responses", json={"input": "And her colour?",
                                                         "previous_response_id": first["id"]})
        got = await http.get(f"/v1/responses/{first['id']}")
        await http.delete(f"/v1/responses/{first['id']}")
        gone = await http.get(f"/v1/responses/{first['id']}")
    assert second.status_code == 200 and got.json()["id"] == first["id"] and gone.status_code == 404
    turns = [(m["role"], m["content"]) for m in upstreams.chats[-1]["messages"] if m["role"] != "system"]
    assert turns == [("user", "Who is Fitch?"), ("assistant", upstreams.answer), ("user", "And her colour?")]


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "q", "tools": [{"type": "function", "name": "f"}]}, "tools"),
    ({"input": "q", "text": {"format": {"type": "json_object"}}}, "text.format"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, "input"),
    ({"input": "q", "previous_response_id": "resp_unknown"}, "previous_response_id"),
    ({"input": "q", "max_output_tokens": 100000}, "max_output_tokens"),
    ({"input": "q", "conversation": "c"}, "conversation"),
])
async def test_what_a_retrieval_pipeline_does_not_take_is_refused_before_any_call(tmp_path, body, param):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        reply = await http.post("/v1/responses", json=body)
    assert reply.status_code in (400, 404) and reply.json()["error"]["param"] == param, reply.text
    assert upstreams.chats == [] and upstreams.embedded == []
