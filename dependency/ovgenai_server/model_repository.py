"""What to serve: one model (IR folder or GGUF file) or an OVMS model repository with several.

An OVMS repository is a `config.json` whose `mediapipe_config_list` (and `model_config_list`) entries name model
folders; each folder may hold a `graph.pbtxt` whose `LLMCalculatorOptions` node options set that model's engine
options (`models_path`, `cache_size`, `max_num_seqs`, ...), as export_model.py writes them.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from .engine.spec import ModelSpec
from .settings import BackendSettings

_OPTION = re.compile(r"(\w+)\s*:\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s,}]+)")
_GRAPH_TO_SPEC = {
    "models_path": "path",
    "device": "device",
    "cache_size": "cache_size_gb",
    "kv_cache_precision": "kv_cache_precision",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "dynamic_split_fuse": "dynamic_split_fuse",
    "enable_prefix_caching": "enable_prefix_caching",
    "max_tokens_limit": "max_tokens_limit",
    "best_of_limit": "best_of_limit",
    "plugin_config": "plugin_config",
}


class ModelRepositoryError(ValueError):
    pass


def base_spec(settings: BackendSettings, name: str, path: Path) -> ModelSpec:
    return ModelSpec(
        name=name,
        path=path,
        device=settings.device,
        cache_size_gb=settings.cache_size,
        kv_cache_precision=settings.kv_cache_precision,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        max_num_seqs=settings.max_num_seqs,
        dynamic_split_fuse=settings.dynamic_split_fuse,
        enable_prefix_caching=settings.enable_prefix_caching,
        max_tokens_limit=settings.max_tokens_limit,
        best_of_limit=settings.best_of_limit,
        plugin_config=settings.plugin_config,
        inference_precision=settings.inference_precision,
        enable_quantized_weights=settings.enable_quantized_weights,
        cache_dir=settings.cache_dir,
    )


def parse_graph_options(text: str) -> dict[str, Any]:
    """The `node_options` of the LLM node of a graph.pbtxt, as Python values."""
    start = text.find("LLMCalculatorOptions")
    if start < 0:
        return {}
    block = text[text.find(":", start) :]
    depth, end = 0, len(block)
    for i, char in enumerate(block):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                end = i
                break
    options: dict[str, Any] = {}
    for key, raw in _OPTION.findall(block[:end]):
        options[key] = _graph_value(raw)
    return options


def _graph_value(raw: str) -> Any:
    if raw[0] in "\"'":
        return raw[1:-1].encode().decode("unicode_escape")
    if raw in ("true", "false"):
        return raw == "true"
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw)
        except ValueError:
            return raw


def model_file(folder: Path) -> Path:
    """The loadable thing inside a model folder: the folder for IR, or its single .gguf file."""
    if (folder / "openvino_model.xml").is_file():
        return folder
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    if not folder.exists():
        raise ModelRepositoryError(f"Model path '{folder}' does not exist.")
    raise ModelRepositoryError(
        f"'{folder}' holds neither an OpenVINO IR model (openvino_model.xml) nor exactly one .gguf file."
    )


def _repository_specs(config_path: Path, settings: BackendSettings) -> list[ModelSpec]:
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ModelRepositoryError(f"'{config_path}' is not valid JSON: {error}") from error
    root = config_path.parent
    # LLMs are mediapipe graphs in OVMS; `model_config_list` holds the other models (embeddings, rerankers),
    # which this server leaves to the embedding service.
    entries = list(config.get("mediapipe_config_list", []))
    specs = []
    for entry in entries:
        name = entry.get("name")
        if not name:
            raise ModelRepositoryError(f"An entry of '{config_path}' has no 'name'.")
        folder = root / entry.get("base_path", name)
        graph = folder / entry.get("graph_path", "graph.pbtxt")  # an absolute graph_path stays as it is
        graph_text = graph.read_text(encoding="utf-8") if graph.is_file() else ""
        if graph_text and "LLMCalculator" not in graph_text:
            continue  # an embeddings or rerank graph
        options = parse_graph_options(graph_text)
        models_path = folder / options.pop("models_path", "./")
        spec = base_spec(settings, name, model_file(models_path) if models_path.is_dir() else models_path)
        # Precedence: what the user set explicitly (flag or environment) > graph.pbtxt > defaults.
        explicit = settings.model_fields_set
        overrides = {
            _GRAPH_TO_SPEC[k]: v for k, v in options.items() if k in _GRAPH_TO_SPEC and k not in explicit
        }
        if isinstance(overrides.get("plugin_config"), str):
            overrides["plugin_config"] = json.loads(overrides["plugin_config"] or "{}")
        if "device" in overrides:
            overrides["device"] = str(overrides["device"]).upper()
        specs.append(replace(spec, **overrides))
    if not specs:
        raise ModelRepositoryError(f"'{config_path}' lists no text-generation models.")
    return specs


def load_model_specs(settings: BackendSettings) -> list[ModelSpec]:
    path = Path(settings.model).expanduser()
    if path.is_file() and path.suffix == ".json":
        return _repository_specs(path, settings)
    if path.is_dir() and (path / "config.json").is_file() and not (path / "openvino_model.xml").is_file():
        return _repository_specs(path / "config.json", settings)
    if path.is_file() and path.suffix == ".gguf":
        return [base_spec(settings, settings.served_model_name or path.stem, path)]
    if path.is_dir():
        return [base_spec(settings, settings.served_model_name or path.name, model_file(path))]
    raise ModelRepositoryError(
        f"Model path '{path}' does not exist. Prepare the default models with "
        "'python -m ovgenai_server.models defaults', or pass --model <IR folder | .gguf | repository>."
    )
