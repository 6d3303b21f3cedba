"""The repository format as the backend reads it: graph.pbtxt's options read and written (comments, braces in
strings, what cannot be read), config.json's entries registered, and an exported vision-language model's folder as
one model, not a repository of several."""

from __future__ import annotations

import json
import re

import pytest

from ovgenai_models.repository import (
    ModelRepositoryError,
    graph_pbtxt,
    is_vision_model,
    language_model_xml,
    model_file,
    parse_graph_options,
    register,
    repository_config,
)


def test_an_exported_vision_model_folder_is_a_model_not_a_repository(tmp_path):
    for name in ("config.json", "openvino_language_model.xml", "openvino_vision_embeddings_model.xml"):
        (tmp_path / name).write_text("{}")
    assert repository_config(tmp_path) is None and model_file(tmp_path) == tmp_path
    assert is_vision_model(tmp_path) and language_model_xml(tmp_path).name == "openvino_language_model.xml"


def test_graph_options_round_trip():
    text = graph_pbtxt({"models_path": "./", "cache_size": 2, "enable_prefix_caching": True,
                        "plugin_config": '{"NUM_STREAMS": 1}', "device": "GPU"})
    assert parse_graph_options(text) == {"models_path": "./", "cache_size": 2, "enable_prefix_caching": True,
                                         "plugin_config": '{"NUM_STREAMS": 1}', "device": "GPU"}


def test_graph_options_are_read_past_comments_and_braces_in_strings():
    """Text format allows `#` comments (hand-edited graphs have them); a brace inside a string is not nesting."""
    text = graph_pbtxt({"models_path": "./", "cache_size": 2, "plugin_config": '{"A": "}"}', "max_num_seqs": 4})
    text = text.replace("cache_size: 2,", "# the KV cache, in GB: { more later\n          cache_size: 2, # small")
    assert parse_graph_options(text) == {"models_path": "./", "cache_size": 2, "plugin_config": '{"A": "}"}',
                                         "max_num_seqs": 4}


def test_graph_options_that_cannot_be_read_are_an_error_naming_them():
    text = graph_pbtxt({"models_path": "./", "max_num_seqs": 4}).replace("max_num_seqs: 4", "max_num_seqs: [4, 5]")
    with pytest.raises(ModelRepositoryError, match=re.escape("[4, 5]")):
        parse_graph_options(text)


def test_register_keeps_other_entries_and_refuses_duplicates(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_config_list": [{"config": {"name": "emb", "base_path": "emb"}}]}))
    register(config, "llm", "llm", llm=True)
    with pytest.raises(FileExistsError):
        register(config, "llm", "llm", llm=True)
    register(config, "llm", "llm2", llm=True, overwrite=True)
    data = json.loads(config.read_text())
    assert data["model_config_list"] == [{"config": {"name": "emb", "base_path": "emb"}}]
    assert data["mediapipe_config_list"] == [{"name": "llm", "base_path": "llm2"}]
