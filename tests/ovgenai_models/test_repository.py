"""The repository format as the backend reads it: graph.pbtxt's options read and written (comments, braces in strings,
what cannot be read), config.json's entries registered, one LLM made the one served with its draft, and an exported
vision-language model's folder as one model, not a repository of several."""

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
    serve_only,
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


def test_serve_only_lists_one_llm_with_its_draft_and_keeps_the_rest_on_disk(tmp_path):
    config = tmp_path / "config.json"
    for name in ("org/old", "org/new", "org/draft"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "graph.pbtxt").write_text(graph_pbtxt({"models_path": "./", "cache_size": 2}))
        register(config, name, name, llm=True)
    register(config, "emb", "emb", llm=False)
    serve_only(tmp_path, "org/new", "org/draft")
    data = json.loads(config.read_text())
    assert data["mediapipe_config_list"] == [{"name": "org/new", "base_path": "org/new"}]
    assert data["model_config_list"] == [{"config": {"name": "emb", "base_path": "emb"}}]  # not an LLM: kept
    graph = parse_graph_options((tmp_path / "org/new/graph.pbtxt").read_text())
    assert graph == {"models_path": "./", "cache_size": 2, "draft_models_path": "../draft"}
    assert (tmp_path / "org/old/graph.pbtxt").is_file()
    written = config.stat().st_mtime_ns
    serve_only(tmp_path, "org/new", "org/draft")  # as it is: nothing written, so a watching backend sees no change
    assert config.stat().st_mtime_ns == written
    serve_only(tmp_path, "org/new", None)
    assert "draft_models_path" not in parse_graph_options((tmp_path / "org/new/graph.pbtxt").read_text())
    serve_only(tmp_path, "org/unlisted", None)  # prepared but never registered: listed all the same
    assert json.loads(config.read_text())["mediapipe_config_list"] == [{"name": "org/unlisted",
                                                                         "base_path": "org/unlisted"}]
