"""Output items and the Responses events built from a chat answer's parts: reasoning, text and calls, each item
added, written and done, and the response completed, incomplete or failed."""

from __future__ import annotations

from ovgenai_common.errors import ErrorKind
from ovgenai_common.response_output import (
    ResponseEvents,
    event_frame,
    message_parts,
    response_of,
    response_usage,
)
from ovgenai_common.responses_protocol import ResponsesRequest

USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}


def events_for(parts: list[dict], finish: str = "stop") -> tuple[ResponseEvents, list[dict]]:
    builder = ResponseEvents(response_of(ResponsesRequest(input="hi"), "m"))
    events = builder.started()
    for part in parts:
        events += builder.feed(part)
    return builder, events + builder.finish(USAGE, finish)


def test_reasoning_then_text_then_two_calls_make_four_items_in_order():
    builder, events = events_for([
        {"reasoning_content": "let me "}, {"reasoning_content": "think"}, {"content": "Calling."},
        {"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\": 1}"}}]},
        {"tool_calls": [{"index": 1, "id": "c1", "function": {"name": "g", "arguments": "{}"}}]},
    ])
    output = builder.response["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call", "function_call"]
    assert output[0]["content"] == [{"type": "reasoning_text", "text": "let me think"}]
    assert output[1]["content"][0]["text"] == "Calling."
    assert [(c["call_id"], c["name"], c["arguments"]) for c in output[2:]] == [("c0", "f", '{"a": 1}'),
                                                                               ("c1", "g", "{}")]
    assert all(item["status"] == "completed" for item in output)
    kinds = [event["type"] for event in events]
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 4
    assert kinds[-1] == "response.completed" and [e["sequence_number"] for e in events] == list(range(len(events)))
    done = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert [e["arguments"] for e in done] == ['{"a": 1}', "{}"]
    assert builder.response["usage"] == response_usage(USAGE) and builder.response["usage"]["output_tokens"] == 7


def test_a_length_finish_is_incomplete_and_annotations_go_on_the_text():
    builder = ResponseEvents(response_of(ResponsesRequest(input="hi"), "m"))
    builder.feed({"content": "part"})
    events = builder.finish(USAGE, "length", annotations=[{"type": "file_citation", "file_id": "a.txt"}])
    assert events[-1]["type"] == "response.incomplete"
    assert builder.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert builder.response["output"][0]["content"][0]["annotations"] == [{"type": "file_citation",
                                                                           "file_id": "a.txt"}]


def test_a_failure_leaves_the_open_item_incomplete_and_says_why():
    builder = ResponseEvents(response_of(ResponsesRequest(input="hi"), "m"))
    builder.feed({"content": "par"})
    events = builder.fail("The engine stopped.", ErrorKind.UNAVAILABLE)
    assert events[-1]["type"] == "response.failed" and builder.response["status"] == "failed"
    assert builder.response["error"] == {"code": "server_error", "message": "The engine stopped."}
    assert builder.response["output"][0]["status"] == "incomplete"


def test_a_whole_message_gives_the_parts_a_stream_would():
    message = {"role": "assistant", "content": "Hi", "reasoning_content": "r",
               "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    assert message_parts(message) == [{"reasoning_content": "r"}, {"content": "Hi"}, {"tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}, "index": 0}]}]


def test_the_started_response_echoes_the_request_and_frames_name_their_event():
    request = ResponsesRequest.model_validate({"input": "hi", "tool_choice": {"type": "function", "name": "f"},
                                               "tools": [{"type": "function", "name": "f"}], "metadata": {"k": "v"}})
    builder = ResponseEvents(response_of(request, "m"))
    created = builder.started()[0]
    assert created["response"]["tool_choice"] == {"type": "function", "name": "f"}
    assert created["response"]["metadata"] == {"k": "v"} and created["response"]["status"] == "in_progress"
    assert event_frame(created).startswith(b"event: response.created\ndata: {")
