"""What an exported embedding model says about itself (embedding_config.json, written by the export tool): its
pooling, normalization, longest input, dimensions and name; a folder without the file gets the defaults the export
tool writes for a sentence-transformers model. Loading the pipelines: system/test_embedding_service.py."""

from __future__ import annotations

import json

from microservices.embedding.model import EmbeddingModelInfo, read_model_info
from ovgenai_common.names import EMBEDDING_CONFIG


def test_the_recorded_pooling_and_limits_are_read(tmp_path):
    (tmp_path / EMBEDDING_CONFIG).write_text(json.dumps({
        "name": "owner/encoder", "pooling": "cls", "normalize": False, "max_length": 8192, "dimensions": 1024}))
    assert read_model_info(tmp_path, None) == EmbeddingModelInfo("owner/encoder", "cls", False, 8192, 1024)


def test_the_served_name_wins_over_the_recorded_one(tmp_path):
    (tmp_path / EMBEDDING_CONFIG).write_text(json.dumps({"name": "owner/encoder"}))
    assert read_model_info(tmp_path, "served").name == "served"


def test_a_folder_without_a_record_is_mean_pooled_normalized_and_named_after_itself(tmp_path):
    folder = tmp_path / "my-encoder"
    folder.mkdir()
    assert read_model_info(folder, None) == EmbeddingModelInfo("my-encoder", "mean", True, 512, None)
