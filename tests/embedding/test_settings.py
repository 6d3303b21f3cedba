"""EMBEDDING_PLUGIN_CONFIG as compose and users set it."""

from __future__ import annotations

import pydantic
import pytest

from microservices.embedding.settings import EmbeddingSettings


def test_plugin_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("EMBEDDING_PLUGIN_CONFIG", "")  # compose's ${VAR:-} when the user set nothing
    assert EmbeddingSettings().plugin_config == {}
    monkeypatch.setenv("EMBEDDING_PLUGIN_CONFIG", '{"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}')
    assert EmbeddingSettings().plugin_config == {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}
    for bad in ("{bad", "[1]"):
        monkeypatch.setenv("EMBEDDING_PLUGIN_CONFIG", bad)
        with pytest.raises(pydantic.ValidationError, match="plugin_config"):
            EmbeddingSettings()
