"""LangChain's standard chat-model integration suite (langchain-tests) against the backend through ChatOpenAI, run in
its own venv: tests/clients/langchain/backend_chat.py declares the capabilities the README claims, and marks the
tests that fail on the default model's answers alone."""

from __future__ import annotations

import pytest

from tests.support.client_suites import run_pytest
from tests.support.servers import MODELS, RemoteServer


@pytest.fixture(scope="module")
def suite_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    """Without prefix caching, so that each request's greedy answer is the same whichever requests came before it
    (a prefix taken from the cache is computed in other shapes, which rounds differently under bf16)."""
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--enable_prefix_caching", "false"]) as server:
        yield server


def test_the_standard_chat_model_suite_passes(suite_backend, default_model):
    run_pytest("langchain-tests", "langchain/backend_chat.py", CLIENT_SUITE_BASE_URL=suite_backend.url + "/v1",
               CLIENT_SUITE_MODEL=default_model)
