"""KV-cache eviction's settings (engine/contract/cache_eviction.py): OVMS's fields and defaults, checked as
openvino_genai would check them only once the engine starts, and handed to it as its own config. The cache on a running
engine: system/test_cache_eviction.py."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from ovgenai_models.repository import ModelRepositoryError, graph_pbtxt, register
from ovgenai_server.engine.contract.cache_eviction import BLOCK, CacheEvictionConfig
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings


def _model(folder, options=None):
    folder.mkdir(parents=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    if options is not None:
        (folder / "graph.pbtxt").write_text(graph_pbtxt(options))


def test_ovms_defaults_fill_what_is_not_given():
    config = CacheEvictionConfig(start_size=BLOCK, recent_size=BLOCK, max_cache_size=3 * BLOCK)
    assert (config.aggregation_mode, config.apply_rotation, config.snapkv_window_size) == ("NORM_SUM", False, 8)
    assert config.kv_crush_config is None


@pytest.mark.parametrize(("fields", "reason"), [
    ({"start_size": 16}, "greater than or equal to 32"),
    ({"max_cache_size": 100}, "max_cache_size must be a multiple"),
    ({"max_cache_size": 64}, re.escape("larger than start_size + recent_size")),
    ({"aggregation_mode": "MAX"}, "aggregation_mode"),
    ({"kv_crush_config": {"budget": -1}}, "budget"),
])
def test_sizes_are_whole_blocks_and_the_cache_holds_more_than_both_ends(fields, reason):
    with pytest.raises(ValidationError, match=reason):
        CacheEvictionConfig.model_validate({"start_size": 32, "recent_size": 32, "max_cache_size": 128, **fields})


def test_the_config_reaches_openvino_genai_with_its_kvcrush_settings():
    config = CacheEvictionConfig.model_validate({
        "start_size": 64, "recent_size": 128, "max_cache_size": 512, "aggregation_mode": "SUM",
        "kv_crush_config": {"budget": 4, "anchor_point_mode": "MEAN", "rng_seed": 7}})
    native = config.to_openvino()
    assert (native.get_start_size(), native.get_recent_size(), native.get_max_cache_size()) == (64, 128, 512)
    assert str(native.aggregation_mode).endswith("SUM") and native.kvcrush_config.budget == 4
    assert str(native.kvcrush_config.anchor_point_mode).endswith("MEAN") and native.kvcrush_config.rng_seed == 7


EVICTION = {"start_size": 32, "recent_size": 96, "max_cache_size": 256, "kv_crush_config": {"budget": 8}}


def test_cache_eviction_from_graph_pbtxt_as_ovms_writes_it(tmp_path):
    _model(tmp_path / "a", {"models_path": "./", "cache_eviction_config": {**EVICTION, "aggregation_mode": "SUM"}})
    register(tmp_path / "config.json", "a", "a", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path), cache_size=1))
    eviction = spec.cache_eviction_config
    assert (eviction.max_cache_size, eviction.aggregation_mode, eviction.kv_crush_config.budget) == (256, "SUM", 8)
    scheduler = spec.scheduler_config()
    assert scheduler.use_cache_eviction and scheduler.cache_eviction_config.get_max_cache_size() == 256


@pytest.mark.parametrize(("change", "reason"), [
    ({"start_size": 30}, "start_size"),  # openvino_genai would refuse it only when the engine starts
    ({"max_cache_size": 128}, re.escape("larger than start_size + recent_size")),
    ({"recent_size": 100}, "multiple of the KV block size"),
    ({"window": 3}, "window"),
])
def test_a_cache_eviction_config_the_engine_would_refuse_is_refused_at_start(tmp_path, change, reason):
    _model(tmp_path / "a", {"models_path": "./", "cache_eviction_config": {**EVICTION, **change}})
    register(tmp_path / "config.json", "a", "a", llm=True)
    with pytest.raises(ModelRepositoryError, match=reason):
        load_model_specs(BackendSettings(model=str(tmp_path)))
