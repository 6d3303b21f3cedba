"""A model's own generation defaults (models/generation_defaults.py): read from its generation_config.json (or a
folder GENERATION_CONFIG names), none for `vllm`/`none`, values the engine cannot take left out."""

from __future__ import annotations

import json

import pytest

from ovgenai_server.models.generation_defaults import GenerationDefaults, read_generation_defaults

QWEN = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
        "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8}


def folder_with(tmp_path, config: dict):
    (tmp_path / "generation_config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_models_own_file_gives_its_sampling_defaults(tmp_path):
    defaults = read_generation_defaults(folder_with(tmp_path, QWEN))
    assert defaults == GenerationDefaults(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)
    assert defaults.shown() == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}


@pytest.mark.parametrize("choice", ["vllm", "none", "NONE"])
def test_vllm_or_none_leaves_the_engines_defaults(tmp_path, choice):
    assert read_generation_defaults(folder_with(tmp_path, QWEN), choice) == GenerationDefaults()


def test_a_folder_or_file_of_ones_own_replaces_the_models(tmp_path):
    model, mine = tmp_path / "model", tmp_path / "mine"
    model.mkdir()
    mine.mkdir()
    folder_with(model, QWEN)
    folder_with(mine, {"temperature": 0.0, "max_new_tokens": 64})
    assert read_generation_defaults(model, str(mine)) == GenerationDefaults(temperature=0.0, max_new_tokens=64)
    assert read_generation_defaults(model, str(mine / "generation_config.json")).max_new_tokens == 64
    with pytest.raises(ValueError, match="does not exist"):
        read_generation_defaults(model, str(tmp_path / "missing"))


def test_a_model_without_the_file_and_values_the_engine_cannot_take(tmp_path, caplog):
    assert read_generation_defaults(tmp_path) == GenerationDefaults() == read_generation_defaults(None)
    folder_with(tmp_path, {"temperature": 7, "top_p": 0, "top_k": 1.5, "min_p": 0.05, "max_new_tokens": True})
    assert read_generation_defaults(tmp_path) == GenerationDefaults(min_p=0.05)
    assert "temperature 7 is not one the engine takes" in caplog.text
