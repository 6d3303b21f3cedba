from __future__ import annotations

import json

from ovgenai_server.tool_calls import parse_tool_calls


def test_hermes_blocks():
    text = 'ok <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call><tool_call>{"name": "b"}</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "ok" and [c["function"]["name"] for c in calls] == ["a", "b"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"x": 1}


def test_bare_json_llama_style():
    content, calls = parse_tool_calls('{"name": "f", "parameters": {"q": "z"}}')
    assert content is None and calls[0]["function"]["arguments"] == '{"q": "z"}'


def test_plain_text_is_content():
    assert parse_tool_calls("just words") == ("just words", [])
    assert parse_tool_calls('{"not": "a call"}') == ('{"not": "a call"}', [])
