"""The backend's request models (api/protocol.py): values strictly typed (the fuzzer's findings), bodies documented as
closed; vLLM's tokenizer routes, the text form or the chat form told apart by `messages`, each with its own errors;
detokenize's ids bounded as int64."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter, ValidationError

from ovgenai_common.responses_protocol import ResponsesRequest
from ovgenai_server.api.anthropic_protocol import CountTokensRequest
from ovgenai_server.api.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    TokenizeChatRequest,
    TokenizeCompletionRequest,
    TokenizeRequest,
)

TOKENIZE = TypeAdapter(TokenizeRequest)


def test_a_body_with_messages_is_the_chat_form_and_any_other_the_text_form():
    chat = TOKENIZE.validate_python({"messages": [{"role": "user", "content": "hi"}], "model": "m"})
    text = TOKENIZE.validate_python({"prompt": "hi"})
    assert isinstance(chat, TokenizeChatRequest) and isinstance(text, TokenizeCompletionRequest)
    assert (chat.add_special_tokens, chat.add_generation_prompt, chat.continue_final_message) == (False, None, False)
    assert (text.add_special_tokens, text.return_token_strs, text.model) == (True, False, None)


def test_a_chat_bodys_errors_are_its_own_not_the_text_forms():
    with pytest.raises(ValidationError) as refused:
        TOKENIZE.validate_python({"messages": [{"role": "wizard", "content": "hi"}]})
    locations = [error["loc"] for error in refused.value.errors()]
    assert all(loc[0] == "TokenizeChatRequest" for loc in locations), locations
    assert not any("prompt" in loc for loc in locations)  # never "missing prompt" for a bad message


@pytest.mark.parametrize("body", [{"messages": []}, {"prompt": 42}, {}, ["prompt"]])
def test_what_is_neither_form_is_refused(body):
    with pytest.raises(ValidationError):
        TOKENIZE.validate_python(body)


def test_unknown_fields_are_kept_to_be_named_in_the_refusal():
    assert TOKENIZE.validate_python({"prompt": "hi", "unknown": 1}).unknown_fields() == ["unknown"]


def test_detokenize_takes_any_int64_id_and_nothing_else():
    assert DetokenizeRequest(tokens=[0, 2**63 - 1]).tokens == [0, 2**63 - 1]
    for tokens in ([-1], [2**63], ["a"]):
        with pytest.raises(ValidationError):
            DetokenizeRequest(tokens=tokens)


MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("fields", [
    {"stream": 0.0}, {"stream": "true"}, {"max_tokens": "5"}, {"n": 2.0}, {"logprobs": 1},
    {"messages": [{"role": "user", "content": "hi", "tool_call_id": 5}]},
    {"stream_options": {"include_usage": "yes"}},
])
def test_chat_values_of_another_type_are_refused(fields):
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate_json(json.dumps({"messages": MESSAGES, **fields}))


def test_json_numbers_still_fill_number_fields():
    body = json.dumps({"messages": MESSAGES, "temperature": 1, "top_p": 1})
    request = ChatCompletionRequest.model_validate_json(body)
    assert request.temperature == 1.0 and request.top_p == 1.0
    assert CompletionRequest.model_validate_json('{"prompt": [1, 2], "echo": false}').prompt == [1, 2]


def test_chat_bodies_are_documented_as_closed():
    schema = ChatCompletionRequest.model_json_schema()
    assert schema["additionalProperties"] is False
    assert "user" in schema["properties"]  # accepted and ignored, so documented


@pytest.mark.parametrize(("model", "body", "field"), [
    (ChatCompletionRequest, {"messages": MESSAGES * 2049}, "messages"),
    (ChatCompletionRequest, {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}] * 4097}]},
     "messages"),
    (ChatCompletionRequest, {"messages": MESSAGES, "tools": [{"type": "function"}] * 129}, "tools"),
    (TokenizeChatRequest, {"messages": MESSAGES * 120_000}, "messages"),
    (CountTokensRequest, {"messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}} for i in range(20_000)]}]}, "messages"),
    (ResponsesRequest, {"input": [{"role": "user", "content": "x"}] * 2049}, "input"),
])
def test_bodies_of_many_items_are_refused_naming_the_field(model, body, field):
    """Counted before their items are validated or any template rendered (OpenAI's bounds: 2048 messages, 128
    tools; 4096 content parts in all)."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate(body)
    errors = refused.value.errors()
    assert {error["loc"][0] for error in errors} == {field}
    assert any("at most" in error["msg"] for error in errors), errors  # (a union also says its string was not one)
