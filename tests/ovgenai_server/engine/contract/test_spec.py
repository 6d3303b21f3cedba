"""A model's spec (engine/contract/spec.py): the longest context it accepts, the scheduler and the properties its
pipeline is built with, and how it describes itself in the engine's log. Specs are made as the server makes them
(model_specs.base_spec), on a folder that holds no model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ovgenai_models.repository import graph_pbtxt, register
from ovgenai_server.engine.contract import kv_cache
from ovgenai_server.engine.contract.tuning import AutotunePlan
from ovgenai_server.models.specs import base_spec, load_model_specs
from ovgenai_server.settings import BackendSettings


def _model(folder, options=None):
    folder.mkdir(parents=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    if options is not None:
        (folder / "graph.pbtxt").write_text(graph_pbtxt(options))


def spec_of(folder, **settings):
    (folder / "openvino_model.xml").write_text("<net/>")
    return base_spec(BackendSettings(model=str(folder), **settings), "m", folder)


@pytest.fixture()
def cpu_spec(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    return load_model_specs(BackendSettings(model=str(tmp_path)))[0]


def test_the_context_is_the_settings_limit_capped_by_the_models_own(tmp_path):
    assert spec_of(tmp_path, max_tokens_limit=4096).max_context() == 4096
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    assert spec_of(tmp_path, max_tokens_limit=4096).max_context() == 2048
    assert spec_of(tmp_path, max_tokens_limit=1000).max_context() == 1000
    # A vision-language model's limit is its language model's.
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"max_position_embeddings": 1024}}))
    assert spec_of(tmp_path).max_context() == 1024
    (tmp_path / "config.json").write_text("{not json")  # unreadable: the settings' limit holds
    assert spec_of(tmp_path, max_tokens_limit=4096).max_context() == 4096


def test_without_split_fuse_the_context_is_one_steps_budget(tmp_path):
    spec = spec_of(tmp_path, dynamic_split_fuse=False, max_num_batched_tokens=256, max_num_seqs=256)
    assert spec.max_context() == 256
    assert spec_of(tmp_path, max_num_batched_tokens=256).max_context() == 4096  # split-fuse: steps are chunked


def test_a_gguf_models_folder_is_the_files(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    spec = replace(spec_of(tmp_path), path=gguf)
    assert spec.folder == tmp_path and spec_of(tmp_path).folder == tmp_path


@pytest.mark.parametrize(("cache_size", "whole", "blocks"), [(2.4, 2, 0), (1, 1, 0), (0.5, 0, 5000), (0.01, 0, 100)])
def test_the_cache_is_whole_gigabytes_or_below_one_a_number_of_blocks(tmp_path, cache_size, whole, blocks):
    config = spec_of(tmp_path, cache_size=cache_size).scheduler_config()
    assert (config.cache_size, config.num_kv_blocks) == (whole, blocks)


def test_a_cache_sized_at_start_is_measured_on_a_cpu_and_left_to_grow_on_a_gpu(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(kv_cache, "cache_size_for", lambda *args: asked.append(args) or 7)
    spec = spec_of(tmp_path, cache_size=0, kv_cache_precision="u8", max_num_seqs=16, max_tokens_limit=1024)
    assert spec.scheduler_config().cache_size == 7
    assert asked == [(tmp_path, "u8", 16, 1024)]
    assert replace(spec, device="GPU").scheduler_config().cache_size == 0 and len(asked) == 1


def test_the_scheduler_takes_the_batch_options(tmp_path):
    config = spec_of(tmp_path, cache_size=1, max_num_batched_tokens=300, max_num_seqs=12, dynamic_split_fuse=False,
                     enable_prefix_caching=True).scheduler_config()
    assert (config.max_num_batched_tokens, config.max_num_seqs) == (300, 12)
    assert not config.dynamic_split_fuse and config.enable_prefix_caching


def test_the_properties_carry_the_kv_precision_and_prompt_lookup(tmp_path):
    plain = spec_of(tmp_path).properties()
    assert "KV_CACHE_PRECISION" not in plain and "prompt_lookup" not in plain
    told = spec_of(tmp_path, kv_cache_precision="u8", prompt_lookup=True, plugin_config={"NUM_STREAMS": 2}).properties()
    assert (told["KV_CACHE_PRECISION"], told["prompt_lookup"], told["NUM_STREAMS"]) == ("u8", True, 2)


def test_the_description_is_one_json_object_with_the_properties(tmp_path):
    spec = replace(spec_of(tmp_path, cache_size=1), engine_cores=(0, 1),
                   autotune=AutotunePlan(("kv_cache_precision",), 30.0))
    described = json.loads(spec.describe())
    assert (described["name"], described["path"], described["cache_size"]) == ("m", str(tmp_path), 1)
    assert described["engine_cores"] == [0, 1] and described["autotune"] == ["kv_cache_precision"]
    assert described["properties"]["INFERENCE_NUM_THREADS"] == 2 and described["cache_eviction_config"] is None
    assert json.loads(spec_of(tmp_path).describe())["autotune"] is None


def test_without_cache_eviction_the_scheduler_has_none(tmp_path):
    _model(tmp_path / "a", {"models_path": "./"})
    register(tmp_path / "config.json", "a", "a", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path), cache_size=1))
    assert spec.cache_eviction_config is None and not spec.scheduler_config().use_cache_eviction


def test_the_engine_gets_as_many_threads_as_cores_unless_the_plugin_config_says(cpu_spec):
    assert "INFERENCE_NUM_THREADS" not in cpu_spec.properties()  # sharing: OpenVINO's own choice
    assert replace(cpu_spec, engine_cores=(0, 1, 2)).properties()["INFERENCE_NUM_THREADS"] == 3
    told = replace(cpu_spec, engine_cores=(0, 1, 2), plugin_config={"INFERENCE_NUM_THREADS": 8})
    assert told.properties()["INFERENCE_NUM_THREADS"] == 8
    assert "INFERENCE_NUM_THREADS" not in replace(cpu_spec, engine_cores=(0,), device="GPU").properties()
