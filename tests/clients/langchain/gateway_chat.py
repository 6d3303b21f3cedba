"""LangChain's standard chat-model suite (langchain-tests) against the RAG gateway's OpenAI chat route, through
ChatOpenAI (model `chatqna`), with what the gateway claims: answers from the retrieved documents, usage on unary and
streamed answers (`stream_options.include_usage`); no tools, structured output, JSON mode or images (the backend
takes those, the gateway does not)."""

from __future__ import annotations

from openai_chat import OpenAIChatSuite  # this folder's, beside the suite


class TestGatewayChat(OpenAIChatSuite):
    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_tool_choice(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_image_inputs(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_anthropic_inputs(self) -> bool:
        return False
