"""The engine options of each model to serve: the backend's settings, then a repository model's own graph.pbtxt.

This is the one place per-model overrides are resolved; everything downstream (the engine, admission, /v1/config)
reads the resulting `ModelSpec`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import fields, replace
from pathlib import Path

from pydantic import ValidationError

from ovgenai_models.repository import (
    ModelRepositoryError,
    is_vision_model,
    llm_entries,
    model_file,
    repository_config,
)

from ..engine.contract.cache_eviction import CacheEvictionConfig
from ..engine.contract.spec import ModelSpec
from ..engine.contract.tuning import TUNABLE, AutotunePlan
from ..engine.contract.weights import quantization_missing
from .lora import with_adapters
from ..tools.reasoning import REASONING_PARSERS
from ..settings import BackendSettings
from ..tools.calls import TOOL_PARSERS

logger = logging.getLogger(__name__)

# The engine options a model's graph.pbtxt may set, under the same names as the backend's settings.
GRAPH_OPTIONS = frozenset({
    "device", "cache_size", "kv_cache_precision", "max_num_batched_tokens", "max_num_seqs", "dynamic_split_fuse",
    "enable_prefix_caching", "max_tokens_limit", "best_of_limit", "plugin_config", "tool_parser", "reasoning_parser",
    "cache_eviction_config", "draft_model", "num_speculative_tokens",
})
# OVMS's graph.pbtxt names of the same options.
GRAPH_NAMES = {"draft_models_path": "draft_model"}
# Every engine option: the spec's fields but what names the model (or is read from its files, or placed).
_NOT_OPTIONS = ("name", "path", "vision", "engine_cores", "autotune", "lora")
_ENGINE_OPTIONS = tuple(field.name for field in fields(ModelSpec) if field.name not in _NOT_OPTIONS)


def base_spec(settings: BackendSettings, name: str, path: Path) -> ModelSpec:
    vision = is_vision_model(path.parent if path.suffix == ".gguf" else path)
    return ModelSpec(name=name, path=path, vision=vision,
                     **{option: getattr(settings, option) for option in _ENGINE_OPTIONS})


def _repository_specs(config_path: Path, settings: BackendSettings) -> list[ModelSpec]:
    specs = []
    # Precedence: what the user set explicitly (flag or environment) > graph.pbtxt > defaults.
    explicit = settings.model_fields_set
    for entry in llm_entries(config_path):
        entry = replace(entry, options={GRAPH_NAMES.get(key, key): value for key, value in entry.options.items()})
        ignored = sorted(set(entry.options) - GRAPH_OPTIONS)
        if ignored:
            logger.warning("%s: graph.pbtxt options this server does not use are ignored: %s", entry.name,
                           ", ".join(ignored))
        overrides = {k: v for k, v in entry.options.items() if k in GRAPH_OPTIONS and k not in explicit}
        if isinstance(overrides.get("plugin_config"), str):
            overrides["plugin_config"] = json.loads(overrides["plugin_config"] or "{}")
        if "device" in overrides:
            overrides["device"] = str(overrides["device"]).upper()
        if "draft_model" in overrides:
            overrides["draft_model"] = Path(overrides["draft_model"])
        if "cache_eviction_config" in overrides:
            overrides["cache_eviction_config"] = _eviction(entry.name, overrides["cache_eviction_config"])
        spec = replace(base_spec(settings, entry.name, entry.path), **overrides)
        specs.append(_with_autotune(spec, settings, explicit | set(overrides)))
    return specs


def _with_autotune(spec: ModelSpec, settings: BackendSettings, chosen: set[str]) -> ModelSpec:
    """The sweep's plan: the tunable options nobody chose (flag, environment, graph.pbtxt, plugin_config), on a
    CPU; none with --no-autotune."""
    if not settings.autotune or not spec.device.startswith("CPU"):
        return spec
    free = [option for option in TUNABLE if option not in chosen]
    if "KV_CACHE_PRECISION" in spec.plugin_config and "kv_cache_precision" in free:
        free.remove("kv_cache_precision")
    if not spec.dynamic_split_fuse and "max_num_batched_tokens" in free:
        free.remove("max_num_batched_tokens")  # without split-fuse it is the context limit (spec.max_context)
    # With nothing to choose the sweep still measures the prompt rate that admission is sized on.
    return replace(spec, autotune=AutotunePlan(tuple(free), settings.autotune_seconds))


def load_model_specs(settings: BackendSettings) -> list[ModelSpec]:
    specs = [_with_draft(_ovms_switches(spec)) for spec in _specs(settings)]
    for spec in specs:
        _check_parsers(spec)
        if not spec.dynamic_split_fuse and spec.max_num_seqs > spec.max_num_batched_tokens:
            # openvino_genai's scheduler throws at the first step of every request in this configuration (each
            # step must fit a token for every running sequence), so refuse it at start rather than restart forever.
            raise ModelRepositoryError(
                f"Model '{spec.name}': without dynamic_split_fuse, max_num_seqs ({spec.max_num_seqs}) must not exceed "
                f"max_num_batched_tokens ({spec.max_num_batched_tokens})."
            )
        missing = quantization_missing(spec.path, spec.enable_quantized_weights, spec.cache_dir,
                                       spec.quantized_weights)
        if missing:
            raise ModelRepositoryError(f"Model '{spec.name}': {missing}")
        if spec.prompt_lookup and not spec.dynamic_split_fuse:
            logger.warning(
                "%s: prompt lookup decoding without dynamic_split_fuse stopped openvino_genai 2026.4's engine under "
                "concurrent requests (README, RAG-aware decoding); keep dynamic_split_fuse on", spec.name,
            )
    return with_adapters(specs, settings.lora_modules)


def _eviction(name: str, message: object) -> CacheEvictionConfig:
    try:
        return CacheEvictionConfig.model_validate(message)
    except ValidationError as error:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'it'}: {e['msg']}" for e in error.errors())
        message = f"Model '{name}': graph.pbtxt's cache_eviction_config is not valid: {reasons}."
        raise ModelRepositoryError(message) from None


def _check_parsers(spec: ModelSpec) -> None:
    """A graph.pbtxt's parser names are checked here (the settings' own are checked when parsed)."""
    for option, names in (("tool_parser", TOOL_PARSERS), ("reasoning_parser", REASONING_PARSERS)):
        value = getattr(spec, option)
        if value is not None and value not in names:
            raise ModelRepositoryError(
                f"Model '{spec.name}': {option} '{value}' is not one of {', '.join(sorted(names))}."
            )


def _with_draft(spec: ModelSpec) -> ModelSpec:
    """A draft model's pipeline, without the prefix cache: openvino_genai 2026.4's speculative decoding stops the
    engine (sequence_group.cpp's content_length check) when two sampled requests of one prompt find it cached, as
    n > 1 does. Prompt lookup and a draft model are two ways to propose tokens: the draft replaces prompt lookup."""
    if spec.draft_model is None:
        return spec
    if spec.prompt_lookup:  # the stack's default (PROMPT_LOOKUP) yields to the draft the user named
        logger.warning("%s: prompt lookup decoding is off: the draft model proposes the tokens", spec.name)
    if not (spec.draft_model.is_file() or (spec.draft_model / "openvino_model.xml").is_file()):
        raise ModelRepositoryError(f"Model '{spec.name}': the draft model '{spec.draft_model}' is not an OpenVINO "
                                   "IR folder or a .gguf file.")
    if spec.enable_prefix_caching:
        logger.warning("%s: the prefix cache is off with a draft model (openvino_genai 2026.4 stops the engine when "
                       "sampled requests of one prompt find it cached)", spec.name)
    return replace(spec, enable_prefix_caching=False, prompt_lookup=False)


def _ovms_switches(spec: ModelSpec) -> ModelSpec:
    """OVMS switches prompt lookup decoding on with a plugin_config key; here it is an engine option too."""
    if spec.plugin_config.get("prompt_lookup") is True:
        return replace(spec, prompt_lookup=True)
    return spec


def _specs(settings: BackendSettings) -> list[ModelSpec]:
    path = Path(settings.model).expanduser()
    config_path = repository_config(path)
    if config_path is not None:
        return _repository_specs(config_path, settings)
    explicit = settings.model_fields_set
    if path.is_file() and path.suffix == ".gguf":
        return [_with_autotune(base_spec(settings, settings.served_model_name or path.stem, path), settings, explicit)]
    if path.is_dir():
        spec = base_spec(settings, settings.served_model_name or path.name, model_file(path))
        return [_with_autotune(spec, settings, explicit)]
    raise ModelRepositoryError(
        f"Model path '{path}' does not exist. Prepare the default models with "
        "'python -m ovgenai_models defaults', or pass --model <IR folder | .gguf | repository>."
    )
