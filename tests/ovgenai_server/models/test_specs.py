"""Each model's engine options (models/specs.py): the backend's settings, then a repository model's own graph.pbtxt
(OVMS layout), what is refused at start, and the options autotune may choose. How graph.pbtxt is read and a
repository's config.json written: tests/ovgenai_models/test_repository.py."""

from __future__ import annotations

import sys

import pytest

from ovgenai_models.repository import ModelRepositoryError, graph_pbtxt, register
from ovgenai_server.engine.contract.tuning import AutotunePlan
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings

BOTH = ("max_num_batched_tokens", "kv_cache_precision")


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


def test_switched_on_by_the_setting_or_per_model_by_ovms_plugin_config_key(tmp_path, monkeypatch):
    from ovgenai_models.repository import register
    from ovgenai_server.models.specs import load_model_specs
    from ovgenai_server.settings import BackendSettings

    for name, options in (("lookup", {"plugin_config": '{"prompt_lookup": true}'}), ("plain", {})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "openvino_model.xml").write_text("<net/>")
        (tmp_path / name / "graph.pbtxt").write_text(graph_pbtxt({"models_path": "./", **options}))
        register(tmp_path / "config.json", name, name, llm=True)
    specs = {s.name: s for s in load_model_specs(BackendSettings(model=str(tmp_path)))}
    assert specs["lookup"].prompt_lookup and specs["lookup"].properties()["prompt_lookup"] is True
    assert not specs["plain"].prompt_lookup and "prompt_lookup" not in specs["plain"].properties()
    monkeypatch.setenv("PROMPT_LOOKUP", "true")
    assert all(s.prompt_lookup for s in load_model_specs(BackendSettings(model=str(tmp_path))))


def _spec(tmp_path, **settings):
    """The spec of a model folder (no model in it: the plan reads only the settings)."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    return load_model_specs(BackendSettings(model=str(folder), cache_dir=tmp_path, **settings))[0]


def test_the_plan_sweeps_only_what_nobody_set(tmp_path, monkeypatch):
    assert _spec(tmp_path).autotune == AutotunePlan(BOTH, 30.0)
    assert _spec(tmp_path, max_num_batched_tokens=256).autotune.options == ("kv_cache_precision",)
    monkeypatch.setenv("VLLM_OPENVINO_KV_CACHE_PRECISION", "u8")
    assert _spec(tmp_path).autotune.options == ("max_num_batched_tokens",)
    monkeypatch.delenv("VLLM_OPENVINO_KV_CACHE_PRECISION")
    assert _spec(tmp_path, plugin_config={"KV_CACHE_PRECISION": "f16"}).autotune.options == (
        "max_num_batched_tokens",)
    # Without split-fuse the step budget is the context limit: never swept.
    assert _spec(tmp_path, dynamic_split_fuse=False).autotune.options == ("kv_cache_precision",)
    assert _spec(tmp_path, autotune=False).autotune is None
    assert _spec(tmp_path, autotune_seconds=12).autotune.seconds == 12


def test_graph_options_are_the_users_choice_too(tmp_path):
    from ovgenai_models.repository import graph_pbtxt, register

    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "openvino_model.xml").write_text("<net/>")
    (folder / "graph.pbtxt").write_text(graph_pbtxt({"models_path": "./", "max_num_batched_tokens": 1024}))
    register(tmp_path / "config.json", "a", "a", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path), cache_dir=tmp_path))
    assert spec.max_num_batched_tokens == 1024 and spec.autotune.options == ("kv_cache_precision",)


def test_a_gpu_model_is_not_swept(tmp_path):
    assert _spec(tmp_path, device="GPU").autotune is None


def test_a_draft_model_in_the_settings_or_ovms_graph_turns_the_prefix_cache_off(tmp_path, caplog):
    _model(tmp_path / "target", {"models_path": "./", "draft_models_path": "../draft"})
    _model(tmp_path / "draft")
    register(tmp_path / "config.json", "target", "target", llm=True)
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path)))
    assert spec.draft_model == tmp_path / "draft" and not spec.enable_prefix_caching
    assert "prefix cache is off" in caplog.text
    _model(tmp_path / "plain")
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path / "plain"), draft_model=str(tmp_path / "draft"),
                                              num_speculative_tokens=3))
    assert spec.draft_model == tmp_path / "draft" and spec.num_speculative_tokens == 3


def test_a_draft_model_that_is_not_a_model_is_refused_at_start_and_one_replaces_prompt_lookup(tmp_path):
    _model(tmp_path / "plain")
    _model(tmp_path / "draft")
    with pytest.raises(ModelRepositoryError, match="not an OpenVINO IR folder or a .gguf"):
        load_model_specs(BackendSettings(model=str(tmp_path / "plain"), draft_model=str(tmp_path / "missing")))
    [spec] = load_model_specs(BackendSettings(model=str(tmp_path / "plain"), draft_model=str(tmp_path / "draft"),
                                              prompt_lookup=True))
    assert spec.draft_model is not None and not spec.prompt_lookup
