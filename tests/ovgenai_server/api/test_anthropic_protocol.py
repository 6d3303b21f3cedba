"""Anthropic's Messages request read as a chat completion: system, content blocks, tool use and results, tools,
tool_choice, thinking and sampling."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ovgenai_server.api.anthropic_protocol import CountTokensRequest, MessagesRequest, chat_body

WEATHER = {"name": "weather", "description": "Today's weather.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_system_blocks_and_turns_become_chat_messages():
    request = MessagesRequest.model_validate({
        "max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "12 C"}]},
                {"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}}]},
        ]})
    assert chat_body(request)["messages"] == [
        {"role": "system", "content": "Be brief.\n\nBe kind."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "12 C"},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_images_are_chat_image_parts_and_a_failed_tool_says_so():
    request = MessagesRequest.model_validate({"max_tokens": 9, "messages": [
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "no such city", "is_error": True},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "text", "text": "What is it?"}]}]})
    tool, user = chat_body(request)["messages"]
    assert tool == {"role": "tool", "tool_call_id": "t", "content": "Error: no such city"}
    assert user["content"] == [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                               {"type": "text", "text": "What is it?"}]


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, {"tool_choice": "auto"}),
    ({"type": "any", "disable_parallel_tool_use": True}, {"tool_choice": "required", "parallel_tool_calls": False}),
    ({"type": "tool", "name": "weather"}, {"tool_choice": {"type": "function", "function": {"name": "weather"}}}),
    ({"type": "none"}, {"tool_choice": "none"}),
])
def test_tools_and_tool_choice_in_chat_form(choice, expected):
    request = MessagesRequest.model_validate({"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
                                              "tools": [WEATHER], "tool_choice": choice})
    body = chat_body(request)
    assert body["tools"] == [{"type": "function", "function": {"name": "weather",
                                                               "parameters": WEATHER["input_schema"],
                                                               "description": "Today's weather."}}]
    assert {key: body[key] for key in expected} == expected


def test_sampling_stop_sequences_and_thinking():
    request = MessagesRequest.model_validate({
        "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}], "stop_sequences": ["\n\n"],
        "temperature": 0.2, "top_p": 0.9, "top_k": 5, "thinking": {"type": "disabled"}})
    body = chat_body(request)
    assert (body["max_tokens"], body["stop"], body["temperature"], body["top_p"], body["top_k"]) == (
        9, ["\n\n"], 0.2, 0.9, 5)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    counted = chat_body(CountTokensRequest.model_validate({"messages": [{"role": "user", "content": "hi"}]}))
    assert "max_tokens" not in counted


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": "hi"}]},  # max_tokens is required, as Anthropic's API says
    {"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
    {"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
     "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
    {"max_tokens": 9, "messages": [{"role": "system", "content": "hi"}]},
    {"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}], "temperature": 1.5},
])
def test_what_is_not_anthropics_or_not_taken_here_is_refused(body):
    with pytest.raises(ValidationError):
        MessagesRequest.model_validate(body)
