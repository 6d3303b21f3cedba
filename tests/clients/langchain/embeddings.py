"""LangChain's standard embeddings suite (langchain-tests) against the embedding service, through OpenAIEmbeddings.
`check_embedding_ctx_length=False` as for any server that is not OpenAI's: with it on, the client would send
tiktoken's token ids (OpenAI's vocabulary, not the served model's)."""

from __future__ import annotations

import os

from langchain_openai import OpenAIEmbeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests


class TestEmbeddingService(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[OpenAIEmbeddings]:
        return OpenAIEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"base_url": os.environ["CLIENT_SUITE_BASE_URL"], "model": os.environ["CLIENT_SUITE_MODEL"],
                "api_key": "unused", "check_embedding_ctx_length": False, "max_retries": 0, "timeout": 60}
