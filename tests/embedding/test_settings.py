"""EMBEDDING_PLUGIN_CONFIG as compose and users set it."""

from __future__ import annotations

import pydantic
import pytest

from ovgenai_services.embedding.settings import EmbeddingSettings


def test_plugin_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("EMBEDDING_PLUGIN_CONFIG", "")  # compose's ${VAR:-} when the user set nothing
    assert EmbeddingSettings().plugin_config == {}
    monkeypatch.setenv("EMBEDDING_PLUGIN_CONFIG", '{"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}')
    assert EmbeddingSettings().plugin_config == {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}
    for bad in ("{bad", "[1]"):
        monkeypatch.setenv("EMBEDDING_PLUGIN_CONFIG", bad)
        with pytest.raises(pydantic.ValidationError, match="plugin_config"):
            EmbeddingSettings()


def test_rerank_model_id_alone_serves_the_reranker_from_the_repository(monkeypatch, tmp_path):
    """Compose and Kubernetes set RERANK_MODEL_ID (empty: no reranker); `prepare` put it at its served name."""
    monkeypatch.setenv("MODEL_REPOSITORY_PATH", str(tmp_path))
    monkeypatch.setenv("RERANK_MODEL_ID", "")
    assert EmbeddingSettings().reranker_model is None
    monkeypatch.setenv("RERANK_MODEL_ID", "BAAI/bge-reranker-base")
    assert EmbeddingSettings().reranker_model == str(tmp_path / "BAAI/bge-reranker-base")
    monkeypatch.setenv("RERANK_MODEL_PATH", "/elsewhere/reranker")  # an explicit path wins
    assert EmbeddingSettings().reranker_model == "/elsewhere/reranker"
    monkeypatch.delenv("RERANK_MODEL_PATH")
    monkeypatch.setenv("RERANK_MODEL_ID", "BAAI/bge reranker")
    with pytest.raises(pydantic.ValidationError, match="RERANK_MODEL_ID: 'BAAI/bge reranker' is neither"):
        EmbeddingSettings()


def test_prompts_and_matryoshka_sizes_from_the_environment(monkeypatch):
    monkeypatch.setenv("EMBEDDING_PROMPTS", "")  # compose's ${VAR:-}
    monkeypatch.setenv("MATRYOSHKA_DIMENSIONS", "")
    settings = EmbeddingSettings()
    assert (settings.prompts, settings.matryoshka_dimensions, settings.matryoshka) == ({}, [], None)
    monkeypatch.setenv("EMBEDDING_PROMPTS", '{"query": "query: "}')
    monkeypatch.setenv("MATRYOSHKA_DIMENSIONS", "256, 512")
    settings = EmbeddingSettings()
    assert (settings.prompts, settings.matryoshka_dimensions) == ({"query": "query: "}, [256, 512])
    monkeypatch.setenv("MATRYOSHKA_DIMENSIONS", "[64]")  # vLLM's matryoshka_dimensions, a JSON array
    assert EmbeddingSettings().matryoshka_dimensions == [64]
    for name, bad in (("MATRYOSHKA_DIMENSIONS", "0"), ("EMBEDDING_PROMPTS", '{"query": 1}')):
        monkeypatch.setenv(name, bad)
        with pytest.raises(pydantic.ValidationError):
            EmbeddingSettings()
        monkeypatch.delenv(name)
