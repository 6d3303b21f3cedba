"""What the chat suites share: ChatOpenAI pointed at the service under test (CLIENT_SUITE_BASE_URL,
CLIENT_SUITE_MODEL, set by tests/support/client_suites.py), greedy, usage streamed, no retries."""

from __future__ import annotations

import os

from langchain_openai import ChatOpenAI
from langchain_tests.integration_tests import ChatModelIntegrationTests


class OpenAIChatSuite(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[ChatOpenAI]:
        return ChatOpenAI

    @property
    def chat_model_params(self) -> dict:
        return {"base_url": os.environ["CLIENT_SUITE_BASE_URL"], "model": os.environ["CLIENT_SUITE_MODEL"],
                "api_key": "unused", "temperature": 0, "max_tokens": 100, "stream_usage": True, "max_retries": 0,
                "timeout": 120}
