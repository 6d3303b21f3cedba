"""LangChain's standard chat-model suite (langchain-tests) against the backend, through ChatOpenAI, with the
capabilities the README claims for it on the default model: tool calls on any model (with tool_choice, and
Anthropic-style histories of tool_use and tool_result blocks, which ChatOpenAI sends as OpenAI's tool calls),
structured output and JSON mode, usage on unary and streamed answers; no images (the default model reads text
only)."""

from __future__ import annotations

import pytest
from langchain_core.language_models import BaseChatModel
from openai_chat import OpenAIChatSuite  # this folder's, beside the suite


class TestBackendChat(OpenAIChatSuite):
    @property
    def has_tool_calling(self) -> bool:
        return True

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def has_structured_output(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def supports_image_inputs(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_anthropic_inputs(self) -> bool:
        return True

    # What fails on the default model's answers alone (135M parameters, greedy): the protocol round trip each test
    # checks works, but the model's text never completes what the test parses.
    @pytest.mark.xfail(reason="the model repeats a phrase inside the forced call's arguments until max_tokens, so "
                              "the call LangChain parses is cut JSON")
    def test_structured_output_pydantic_2_v1(self, model: BaseChatModel) -> None:
        super().test_structured_output_pydantic_2_v1(model)

    @pytest.mark.xfail(reason="with the punchline asked for, the model repeats a phrase inside the schema's string "
                              "until max_tokens (the length error LangChain raises)")
    def test_structured_output_optional_param(self, model: BaseChatModel) -> None:
        super().test_structured_output_optional_param(model)

    @pytest.mark.xfail(reason="in JSON mode the model nests one key in itself until max_tokens (the length error "
                              "LangChain raises)")
    def test_json_mode(self, model: BaseChatModel) -> None:
        super().test_json_mode(model)

    @pytest.mark.xfail(reason="the model copies the tool's whole description into the forced call's arguments, "
                              "garbling it, and is cut at max_tokens before the call is whole")
    def test_unicode_tool_call_integration(self, model: BaseChatModel, *, tool_choice: str | None = None,
                                           force_tool_call: bool = True) -> None:
        super().test_unicode_tool_call_integration(model, tool_choice=tool_choice, force_tool_call=force_tool_call)
