"""The Responses API's request read as a chat conversation: input items, tools, text formats and reasoning effort."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ovgenai_common.responses_protocol import (
    ResponsesRequest,
    chat_body,
    chat_messages,
    effort_variables,
    output_messages,
)


def test_text_input_is_one_user_message_after_the_instructions_and_the_earlier_turns():
    request = ResponsesRequest(input="why?", instructions="Be brief.")
    earlier = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert chat_body(request, earlier)["messages"] == [
        {"role": "system", "content": "Be brief."}, *earlier, {"role": "user", "content": "why?"}]


def test_items_become_messages_calls_join_the_assistant_turn_and_outputs_are_tool_messages():
    request = ResponsesRequest.model_validate({"input": [
        {"role": "developer", "content": "rules"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather "},
                                                        {"type": "input_text", "text": "in Oslo?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}]},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "12 C"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
    ]})
    assert chat_messages(request.input) == [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12 C"},
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
    ]


def test_a_call_without_an_assistant_turn_before_it_opens_one():
    request = ResponsesRequest.model_validate({"input": [
        {"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})
    assert chat_messages(request.input)[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}


def test_images_are_chat_image_parts():
    request = ResponsesRequest.model_validate({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "what is it?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]}]})
    assert chat_messages(request.input)[0]["content"] == [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}]


def test_a_responses_output_reads_back_as_the_next_turns_messages():
    output = [{"id": "rs_1", "type": "reasoning", "status": "completed", "summary": [],
               "content": [{"type": "reasoning_text", "text": "hmm"}]},
              {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "Yes.", "annotations": [], "logprobs": []}]}]
    assert output_messages(output) == [{"role": "assistant", "content": "Yes."}]


def test_tools_choices_formats_and_effort_in_chat_form():
    request = ResponsesRequest.model_validate({
        "input": "hi", "max_output_tokens": 9, "top_p": 0.5, "parallel_tool_calls": False,
        "tools": [{"type": "function", "name": "f", "description": "does f", "strict": True}],
        "tool_choice": {"type": "function", "name": "f"},
        "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
        "reasoning": {"effort": "none"}})
    body = chat_body(request, [])
    assert body["tools"] == [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {}}, "description": "does f", "strict": True}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "out", "schema": {"type": "object"}, "strict": True}}
    assert body["reasoning_effort"] == "none"  # chat's own field, one switch for both APIs (effort_variables)
    assert (body["max_completion_tokens"], body["top_p"], body["parallel_tool_calls"]) == (9, 0.5, False)
    high = ResponsesRequest.model_validate({"input": "hi", "reasoning": {"effort": "high"},
                                            "text": {"format": {"type": "json_object"}}})
    assert chat_body(high, [])["reasoning_effort"] == "high"
    assert chat_body(high, [])["response_format"] == {"type": "json_object"}


def test_an_effort_is_the_templates_thinking_switch():
    assert effort_variables("none") == effort_variables("minimal") == {"enable_thinking": False}
    assert effort_variables("high") == {"reasoning_effort": "high"} and effort_variables(None) == {}


def test_vllms_sampling_fields_reach_the_chat_request():
    """vllm bench serve sends them on /v1/responses as on chat; each was a 400 naming it."""
    request = ResponsesRequest.model_validate({
        "input": "hi", "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.1, "seed": 7, "stop": ["x"],
        "ignore_eos": True, "min_tokens": 3, "top_logprobs": 2, "max_tool_calls": 4})
    body = chat_body(request, [])
    assert {name: body[name] for name in ("top_k", "min_p", "repetition_penalty", "seed", "stop", "ignore_eos",
                                          "min_tokens")} == {"top_k": 5, "min_p": 0.1, "repetition_penalty": 1.1,
                                                             "seed": 7, "stop": ["x"], "ignore_eos": True,
                                                             "min_tokens": 3}
    assert request.unknown_fields() == [] and "logprobs" not in body


def test_fields_of_the_hosted_api_are_named_unless_harmless():
    request = ResponsesRequest.model_validate({"input": "hi", "prompt_cache_key": "k", "user": "u",
                                               "prompt": {"id": "p"}})
    assert request.unknown_fields() == ["prompt"]


@pytest.mark.parametrize("item", [
    {"type": "item_reference", "id": "x"},
    {"type": "function_call", "call_id": "", "name": "f", "arguments": "{}"},
    {"role": "tool", "content": "x"},
    {"role": "user", "content": [{"type": "input_text", "text": "x", "extra": 1}]},
])
def test_malformed_or_unsupported_items_are_refused(item):
    with pytest.raises(ValidationError):
        ResponsesRequest.model_validate({"input": [item]})
