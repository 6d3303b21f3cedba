"""Prompt building on the fake model: a template's refusal is the client's 400 without the library's source paths,
a continued assistant message is cut where it ends, and a text at the tokenizer's limit is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ovgenai_common.errors import APIError
from ovgenai_server.api.protocol import ChatCompletionRequest
from ovgenai_server.engine.contract.types import TextPrompt, TokenPrompt
from ovgenai_server.request.prompts import COUNTED_PIECE, chat_prompt, completion_prompts, rendered, tokenized
from tests.support.fake_engine import FakePrompts, fake_model


class Refusing(FakePrompts):
    def render(self, *args, **kwargs):  # noqa: ARG002 - refuses whatever it is given
        raise RuntimeError("Exception from /home/jenkins/agent/workspace/b/repos/openvino.genai/src/cpp/src/"
                           "json_container.cpp:97:\nConversation roles must alternate user/assistant")


def test_a_chat_template_refusal_is_a_400_without_the_library_s_source_paths():
    model = replace(fake_model(), prompts=Refusing())
    with pytest.raises(APIError) as refused:
        rendered(model, [{"role": "user", "content": "hi"}], None, True, None)
    assert refused.value.status == 400 and refused.value.param == "messages"
    assert refused.value.message.endswith("Conversation roles must alternate user/assistant")
    assert "jenkins" not in refused.value.message and ".cpp" not in refused.value.message


def test_a_last_assistant_message_is_continued_where_it_ends():
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is"}]
    assert rendered(fake_model(), messages, None, False, None).endswith("assistant: The answer is")
    with pytest.raises(APIError) as refused:
        rendered(fake_model(), messages, None, True, None, continue_final_message=True)
    assert refused.value.param == "continue_final_message"


def test_a_text_at_the_tokenizer_s_limit_is_refused_not_cut():
    model = fake_model(tokenizer_limit=3)
    assert tokenized(model, "one two", "prompt") == [3, 3]
    with pytest.raises(APIError) as refused:
        tokenized(model, "one two six", "prompt")
    assert refused.value.param == "prompt"


def test_a_vision_model_takes_text_and_any_other_its_token_ids():
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "hi there"}])
    text, prompt = chat_prompt(fake_model(vision=True), request, None)
    assert prompt == TextPrompt(text, [5, 2, 5], ())
    assert chat_prompt(fake_model(), request, None)[1] == TokenPrompt([5, 2, 5])
    assert [p for p, _ in completion_prompts(fake_model(vision=True), [[1, 2]])] == [TokenPrompt([1, 2])]


def test_a_text_certainly_past_the_context_is_refused_counted_in_pieces():
    """The tokenizer holds the GIL for as long as a call lasts: a long text is counted piece by piece, and refused
    before it would be tokenized whole in one call."""
    seen: list[int] = []

    class Counting(FakePrompts):
        def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
            seen.append(len(text))
            return super().tokenize(text, add_special_tokens)

    model = replace(fake_model(), prompts=Counting())  # a context of 64 tokens; the fake: one token per word
    with pytest.raises(APIError) as refused:
        tokenized(model, "word " * 100_000, "prompt", context=64)
    assert refused.value.param == "prompt" and "context is limited to 64 tokens" in refused.value.message
    assert max(seen) <= COUNTED_PIECE and len(seen) == 1  # the first piece was enough
    seen.clear()
    assert len(tokenized(model, "word " * 20, "prompt", context=64)) == 20  # short: tokenized once, whole
    assert seen == [100]
