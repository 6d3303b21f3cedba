"""Model repository resolution and graph.pbtxt parsing (OVMS layout)."""

from __future__ import annotations

import json
import re
import sys

import pytest

from ovgenai_models.repository import ModelRepositoryError, graph_pbtxt, parse_graph_options, register
from ovgenai_server.model_specs import load_model_specs
from ovgenai_server.settings import BackendSettings


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


def _model(folder, options=None):
    folder.mkdir(parents=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    if options is not None:
        (folder / "graph.pbtxt").write_text(graph_pbtxt(options))


def test_repository_with_graph_overrides(tmp_path):
    _model(tmp_path / "org" / "a", {"models_path": "./", "cache_size": 3, "max_num_seqs": 7, "device": "gpu"})
    _model(tmp_path / "b")
    register(tmp_path / "config.json", "org/a", "org/a", llm=True)
    register(tmp_path / "config.json", "b", "b", llm=True)
    specs = {s.name: s for s in load_model_specs(BackendSettings(model=str(tmp_path)))}
    assert specs["org/a"].cache_size == 3 and specs["org/a"].max_num_seqs == 7 and specs["org/a"].device == "GPU"
    assert specs["b"].cache_size == 0 and specs["b"].path == tmp_path / "b"  # the settings default: sized at start


def test_explicit_settings_beat_graph_options(tmp_path):
    _model(tmp_path / "a", {"models_path": "./", "device": "CPU", "cache_size": 3})
    register(tmp_path / "config.json", "a", "a", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path / "config.json"), device="GPU"))
    assert spec.device == "GPU" and spec.cache_size == 3


def test_graph_options_the_server_does_not_use_are_named_in_a_warning(tmp_path, caplog):
    _model(tmp_path / "a", {"models_path": "./", "cache_size": 3, "reasoning_parser": "qwen3", "tool_parser": "hermes3",
                            "max_prompt_len": 1024})
    register(tmp_path / "config.json", "a", "a", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path)))
    assert (spec.cache_size, spec.reasoning_parser, spec.tool_parser) == (3, "qwen3", "hermes3")
    warning = next(r.getMessage() for r in caplog.records if "does not use" in r.getMessage())
    assert "max_prompt_len" in warning and "reasoning_parser" not in warning and "cache_size" not in warning


@pytest.mark.parametrize(("option", "value"), [("tool_parser", "mistral"), ("reasoning_parser", "gptoss")])
def test_a_parser_the_server_does_not_have_is_refused_at_start(tmp_path, option, value):
    _model(tmp_path / "a", {"models_path": "./", option: value})
    register(tmp_path / "config.json", "a", "a", llm=True)
    with pytest.raises(ModelRepositoryError, match=f"{option} '{value}'"):
        load_model_specs(BackendSettings(model=str(tmp_path)))


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


def test_single_folder_gguf_and_errors(tmp_path):
    gguf = tmp_path / "m" / "tiny.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    [spec] = load_model_specs(BackendSettings(model=str(gguf.parent)))
    assert spec.path == gguf and spec.name == "m"
    [named] = load_model_specs(BackendSettings(model=str(gguf), served_model_name="x"))
    assert named.name == "x"
    with pytest.raises(ModelRepositoryError, match="does not exist"):
        load_model_specs(BackendSettings(model=str(tmp_path / "missing")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelRepositoryError, match="neither"):
        load_model_specs(BackendSettings(model=str(tmp_path / "empty")))


def test_seed_environment_names(monkeypatch):
    monkeypatch.setenv("VLLM_OPENVINO_DEVICE", "gpu.1")
    monkeypatch.setenv("VLLM_OPENVINO_KVCACHE_SPACE", "8")
    monkeypatch.setenv("VLLM_OPENVINO_CPU_KV_CACHE_PRECISION", "u8")
    monkeypatch.setenv("VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS", "true")
    settings = BackendSettings()
    assert (settings.device, settings.cache_size, settings.kv_cache_precision) == ("GPU.1", 8, "u8")
    assert settings.enable_quantized_weights


def test_an_unreadable_repository_stops_the_server_with_the_path(monkeypatch, capsys):
    """As a container's non-root user meets a repository prepared with private modes: exit 2, naming the file.
    (Faked: the suite may run as root, whom no file mode stops.)"""
    from ovgenai_server import __main__ as server
    from ovgenai_server import model_specs

    def unreadable(_settings):
        raise PermissionError(13, "Permission denied", "/models/config.json")

    monkeypatch.setattr(model_specs, "load_model_specs", unreadable)
    with pytest.raises(SystemExit) as exit_info:
        server.main(["--model", "/models"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "cannot read the model repository (/models)" in error and "'/models/config.json'" in error, error


def test_a_configuration_the_scheduler_cannot_run_is_refused_at_start(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    settings = BackendSettings(model=str(tmp_path), dynamic_split_fuse=False, max_num_seqs=300,
                               max_num_batched_tokens=256)
    with pytest.raises(ModelRepositoryError, match="max_num_seqs"):
        load_model_specs(settings)
    assert load_model_specs(BackendSettings(model=str(tmp_path), dynamic_split_fuse=False, max_num_seqs=256,
                                            max_num_batched_tokens=256))


def test_quantized_weights_without_nncf_are_refused_at_start_with_the_reason(tmp_path, monkeypatch):
    """The backend image carries no NNCF: the switch is refused before any model loads, saying what to do."""
    _model(tmp_path / "a")
    monkeypatch.setitem(sys.modules, "nncf", None)  # as in an installation without it
    settings = BackendSettings(model=str(tmp_path / "a"), enable_quantized_weights=True, cache_dir=tmp_path / "cache")
    with pytest.raises(ModelRepositoryError, match="needs NNCF") as refused:
        load_model_specs(settings)
    assert "ovgenai_models" in str(refused.value)
    assert load_model_specs(BackendSettings(model=str(tmp_path / "a")))  # without the switch: served as it is


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


def test_without_cache_eviction_the_scheduler_has_none(tmp_path):
    _model(tmp_path / "a", {"models_path": "./"})
    register(tmp_path / "config.json", "a", "a", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path), cache_size=1))
    assert spec.cache_eviction_config is None and not spec.scheduler_config().use_cache_eviction
