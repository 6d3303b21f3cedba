"""LangChain's standard chat-model suite (langchain-tests) against the RAG gateway's OpenAI chat route, through
ChatOpenAI (model `chatqna`), with what the gateway claims: answers from the retrieved documents, usage on unary and
streamed answers (`stream_options.include_usage`); no tools, structured output, JSON mode or images (the backend
takes those, the gateway does not)."""

from __future__ import annotations

import os

from langchain_openai import ChatOpenAI
from langchain_tests.integration_tests import ChatModelIntegrationTests


class TestGatewayChat(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[ChatOpenAI]:
        return ChatOpenAI

    @property
    def chat_model_params(self) -> dict:
        return {"base_url": os.environ["CLIENT_SUITE_BASE_URL"], "model": os.environ["CLIENT_SUITE_MODEL"],
                "api_key": "unused", "temperature": 0, "max_tokens": 100, "stream_usage": True, "max_retries": 0,
                "timeout": 120}

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
