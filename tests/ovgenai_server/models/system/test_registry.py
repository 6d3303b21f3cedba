"""A served model's facts, from its spec and its prepared files (the default model)."""

from __future__ import annotations

import asyncio
import pytest
from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.models.registry import ModelRegistry, ModelStatus, load_openvino_model
from ovgenai_server.tools.calls import detect_tool_format
from tests.support.fake_engine import FakeRuntime, fake_model
from tests.support.servers import MODELS
from tests.ovgenai_server.models.test_registry import _discard


def test_a_models_facts_come_from_its_spec_and_its_files(default_model):
    from ovgenai_server.models.specs import load_model_specs
    from ovgenai_server.settings import BackendSettings

    settings = BackendSettings(model=str(MODELS / default_model), served_model_name="small", autotune=False,
                               max_tokens_limit=1000, max_num_seqs=12, best_of_limit=3, enable_prefix_caching=True)
    [spec] = load_model_specs(settings)
    failures: list[str] = []
    model = load_openvino_model(spec, settings, failures.append)
    try:
        facts = model.facts
        assert (facts.name, facts.max_context, facts.max_num_seqs, facts.best_of_limit) == ("small", 1000, 12, 3)
        assert facts.prefix_caching and not facts.prompt_lookup and not facts.vision
        assert (facts.source, facts.folder, facts.device) == (str(spec.path), spec.folder, "CPU")
        assert facts.vocabulary == 49152 and facts.tokenizer_limit is None
        assert facts.supports_tools == model.prompts.template.supports_tools
        assert facts.tool_format == detect_tool_format(model.prompts.template.text)
        assert model.prompts.tokenize("Hello") and model.runtime.health().state is EngineState.LOADING  # not started
        model.runtime.supervisor.on_fatal("the engine could not start")
        assert failures == ["small: the engine could not start"]
    finally:
        _discard(model.runtime)
    told = load_openvino_model(load_model_specs(settings.model_copy(update={"tool_parser": "llama3_json"}))[0],
                               settings, failures.append)
    try:
        assert told.facts.tool_format == "llama3"  # the spec's parser, not the template's
    finally:
        _discard(told.runtime)
