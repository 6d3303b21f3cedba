"""The backend's own request models (api/protocol.py): vLLM's tokenizer routes, the text form or the chat form told
apart by `messages`, each with its own errors; detokenize's ids bounded as int64."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from ovgenai_server.api.protocol import (
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
