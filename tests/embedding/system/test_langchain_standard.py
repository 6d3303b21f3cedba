"""LangChain's standard embeddings integration suite (langchain-tests) against the embedding service through
OpenAIEmbeddings, run in its own venv (tests/clients/langchain/embeddings.py)."""

from __future__ import annotations

from ovgenai_common.names import DEFAULT_EMBEDDING
from tests.support.client_suites import run_pytest


def test_the_standard_embeddings_suite_passes(embedding_service):
    run_pytest("langchain-tests", "langchain/embeddings.py", CLIENT_SUITE_BASE_URL=embedding_service.url + "/v1",
               CLIENT_SUITE_MODEL=DEFAULT_EMBEDDING)
