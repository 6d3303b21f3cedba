"""The OpenVINO prompt builder (engine/api_process/prompt_builder.py) on the default model's own tokenizer and chat
template: a conversation rendered with or without the assistant's turn opened, text to ids and back, special tokens kept
or skipped, and each token's text for vLLM's return_token_strs. A real tokenizer: the system tier."""

from __future__ import annotations

import pytest

from ovgenai_server.engine.api_process.prompt_builder import OpenVINOPromptBuilder
from tests.support.servers import MODELS

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def builder(default_model) -> OpenVINOPromptBuilder:
    folder = MODELS / default_model
    return OpenVINOPromptBuilder(folder, folder, max_context=512)


def test_the_models_template_renders_the_conversation(builder):
    opened = builder.render(MESSAGES, None, True, None)
    closed = builder.render(MESSAGES, None, False, None)
    assert opened.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert closed.endswith("<|im_start|>user\nhi<|im_end|>\n") and opened.startswith(closed)


def test_text_becomes_ids_and_back(builder):
    ids = builder.tokenize("Hello world")
    assert len(ids) == 2 and all(0 <= i < builder.vocabulary for i in ids)
    assert builder.decode(ids) == "Hello world"
    assert builder.tokenize("Hello world", add_special_tokens=False) == ids  # this tokenizer adds none of its own


def test_special_tokens_are_skipped_when_decoding_unless_kept(builder):
    ids = builder.tokenize("<|im_start|>user")
    assert builder.decode(ids) == "user"
    assert builder.decode(ids, skip_special_tokens=False) == "<|im_start|>user"


def test_each_tokens_text_and_none_for_an_id_outside_the_vocabulary(builder):
    assert builder.token_strings(builder.tokenize("Hello world")) == ["Hello", " world"]
    assert builder.token_strings(builder.tokenize("héllo")) == ["h", "é", "llo"]
    assert builder.token_strings([builder.vocabulary + 10]) == [""]


def test_what_the_model_says_of_itself(builder):
    assert (builder.vocabulary, builder.tokenizer_limit) == (49152, None)  # its tokenizer cuts no text short
    assert builder.template.supports_tools is False  # SmolLM2's template has no tools
