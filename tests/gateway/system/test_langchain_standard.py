"""LangChain's standard chat-model integration suite (langchain-tests) against the gateway's OpenAI chat route through
ChatOpenAI (model `chatqna`), with documents ingested, run in its own venv (tests/clients/langchain/gateway_chat.py
declares what the gateway claims)."""

from __future__ import annotations

from tests.support.client_suites import run_pytest


def test_the_standard_chat_model_suite_passes(ingested_gateway):
    run_pytest("langchain-tests", "langchain/gateway_chat.py", CLIENT_SUITE_BASE_URL=ingested_gateway.url + "/v1",
               CLIENT_SUITE_MODEL="chatqna")
