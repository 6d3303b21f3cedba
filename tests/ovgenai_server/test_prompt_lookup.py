"""Prompt lookup decoding's request parameters: OVMS's names and defaults, refused where they cannot apply."""

from __future__ import annotations

import json

import pytest

from ovgenai_common.errors import APIError
from ovgenai_common.protocol import ChatCompletionRequest
from ovgenai_models.export import TextGenerationOptions, _graph_options
from ovgenai_models.repository import graph_pbtxt, parse_graph_options
from ovgenai_server.engine.generation_config import build_generation_config
from ovgenai_server.sampling import build_params

LIMITS = {"prompt_tokens": 10, "max_context": 100, "best_of_limit": 4, "max_n": 4}


def chat(**fields) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **fields)


def test_a_prompt_lookup_model_gets_ovms_defaults_or_the_requests_values():
    params = build_params(chat(), prompt_lookup=True, **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (5, 3)
    params = build_params(chat(num_assistant_tokens=8, max_ngram_size=2), prompt_lookup=True, **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (8, 2)
    config = build_generation_config(params, [2])
    assert config.num_assistant_tokens == 8 and config.max_ngram_size == 2


def test_other_models_decode_as_usual_and_refuse_the_parameters():
    params = build_params(chat(), **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (0, 0)
    assert not build_generation_config(params, [2]).num_assistant_tokens
    with pytest.raises(APIError) as error:
        build_params(chat(num_assistant_tokens=4), **LIMITS)
    assert error.value.param == "num_assistant_tokens" and "prompt_lookup" in error.value.message


def test_beam_search_is_refused_naming_the_setting_and_n_is_served():
    with pytest.raises(APIError) as error:
        build_params(chat(best_of=2), prompt_lookup=True, **LIMITS)
    assert error.value.param == "best_of" and "prompt_lookup" in error.value.message
    params = build_params(chat(n=2, temperature=1.0), prompt_lookup=True, **LIMITS)  # run as two requests of one
    assert params.n == 2 and params.num_assistant_tokens > 0


def test_the_export_tool_writes_ovms_switch_into_the_graph():
    graph = graph_pbtxt(_graph_options(TextGenerationOptions(prompt_lookup_decoding=True), "./"))
    assert json.loads(parse_graph_options(graph)["plugin_config"]) == {"prompt_lookup": True}
    assert "plugin_config" not in parse_graph_options(graph_pbtxt(_graph_options(TextGenerationOptions(), "./")))


def test_switched_on_by_the_setting_or_per_model_by_ovms_plugin_config_key(tmp_path, monkeypatch):
    from ovgenai_models.repository import register
    from ovgenai_server.model_specs import load_model_specs
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
