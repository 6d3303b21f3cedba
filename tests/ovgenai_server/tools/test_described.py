"""Tools for a template without tool syntax (tools/described.py): their description, the form the answer is held to,
the conversation's calls and results written as messages, and the answer read back as it streams."""

from __future__ import annotations

import json

import pytest

from ovgenai_server.tools.calls import CallDelta, Text
from ovgenai_server.tools.described import DescribedCalls, auto_schema, describe, described

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def read(pieces: list[str]) -> tuple[str, list[CallDelta], DescribedCalls]:
    reader = DescribedCalls()
    events = [event for piece in pieces for event in reader.feed(piece)] + reader.finish()
    text = "".join(event.text for event in events if isinstance(event, Text))
    return text, [event for event in events if isinstance(event, CallDelta)], reader


def test_the_description_names_the_tools_and_the_forms_of_an_answer():
    text = describe(TOOLS, parallel=False)
    assert '"get_weather"' in text and '"tool_calls"' in text and '"response"' in text and "one call" in text


def test_the_answer_is_calls_or_a_response_and_nothing_else():
    schema = auto_schema(TOOLS, parallel=False)
    calls, response = schema["anyOf"]
    assert calls["properties"]["tool_calls"]["maxItems"] == 1 and calls["additionalProperties"] is False
    assert response["properties"] == {"response": {"type": "string"}}


def test_the_conversation_is_written_for_a_template_without_tool_syntax():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
        {"role": "tool", "tool_call_id": "c2", "content": "24 C"},
    ]
    system, user, assistant, results = described(messages, "TOOLS")
    assert system == {"role": "system", "content": "Be brief.\n\nTOOLS"} and user == messages[1]
    assert json.loads(assistant["content"]) == {"tool_calls": [
        {"name": "get_weather", "parameters": {"city": "Paris"}},
        {"name": "get_weather", "parameters": {"city": "Rome"}}]}
    assert results["role"] == "user" and json.loads(results["content"]) == {"tool_responses": [
        {"tool_call_id": "c1", "content": "18 C"}, {"tool_call_id": "c2", "content": "24 C"}]}
    assert described([{"role": "user", "content": "hi"}], "TOOLS")[0] == {"role": "system", "content": "TOOLS"}


@pytest.mark.parametrize("pieces", [
    ['{"response": "Line one\\nline two: caf\\u00e9 \\ud83d\\ude00 \\"quoted\\""}'],
    ['{', '"resp', 'onse": "Line', ' one\\', 'nline two: caf\\u00', 'e9 \\ud83d', '\\ude00 \\"quot', 'ed\\""', '}'],
])
def test_a_response_streams_as_its_text_whatever_the_pieces(pieces):
    text, calls, reader = read(pieces)
    assert text == 'Line one\nline two: café 😀 "quoted"' and calls == [] and reader.calls == 0


def test_calls_come_out_whole_each_with_an_id():
    text, calls, reader = read(['{"tool_calls": [{"name": "get_weather", "par', 'ameters": {"city": "Paris"}}, ',
                                '{"name": "get_weather", "parameters": {"city": "Rome"}}]}'])
    assert text == "" and reader.calls == 2
    assert [(call.name, json.loads(call.arguments)) for call in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    assert all(call.id and call.id.startswith("call_") for call in calls)


def test_an_answer_cut_short_before_its_form_is_kept_as_text():
    assert read(['{"tool_c'])[0] == '{"tool_c'
    assert read(["   "])[0] == ""
