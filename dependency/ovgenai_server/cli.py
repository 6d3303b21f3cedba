"""The backend's command line as the guides users come from type it: OVMS's flags and vLLM's `serve`.

`python -m ovgenai_server` takes its own flags (the settings' names, `--max_num_seqs 8`) and also, as they are
typed in OVMS's and vLLM's guides:

- OVMS: `--rest_port`, `--config_path`, `--model_path`, `--model_name`, `--draft_source_model` (a draft model for
  speculative decoding: a folder, .gguf or Hub id), `--source_model` with
  `--model_repository_path` and `--pull` (pull and serve, models/source.py), `--rest_bind_address`, `--target_device`,
  `--task text_generation`, `--pipeline_type`, `--api_key_file`, and the text-generation options of `ovms --help`
  (`--cache_size`, `--max_num_seqs`, `--enable_prefix_caching true`, ...). OVMS's `--port` is its gRPC port: given
  beside `--rest_port` it is refused (no KServe gRPC here); alone it is the HTTP port, as vLLM's.
- vLLM: `serve MODEL` (or `--model`; a Hub id is fetched first, models/source.py), `--revision`, kebab-case options
  (`--max-num-batched-tokens 256`), flags without a value and their `--no-` forms (`--enable-prefix-caching`,
  `--no-enable-prefix-caching`), `--served-model-name`, `--host`, `--port`, `--api-key`, `--max-model-len`,
  `--enable-chunked-prefill`, `--dtype`, `--kv-cache-dtype auto`, `--tensor-parallel-size 1`, `--trust-remote-code`
  (nothing to trust: models run no code of their own here), `--enable-auto-tool-choice`, `--tool-call-parser`,
  `--reasoning-parser`, `--speculative-config '{"model": ..., "num_speculative_tokens": 4}'` (or method "ngram":
  prompt lookup decoding) and the older `--speculative-model`, `--num-speculative-tokens`, `--lora-modules
  name=path ...` (or its JSON objects: each adapter served as a model of its own, models/lora.py) and `--enable-lora`.

A flag either maps onto the setting it means or is refused with the reason, never silently dropped: this module
translates the command line into the settings' own flags (pydantic-settings parses those) or raises `CLIError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

# Foreign flag (snake case) -> the setting it means.
RENAMED = {
    "rest_port": "port",
    "config_path": "model",
    "model_path": "model",
    "model_name": "served_model_name",
    "rest_bind_address": "host",
    "target_device": "device",
    "max_model_len": "max_tokens_limit",
    "enable_chunked_prefill": "dynamic_split_fuse",
    "tool_call_parser": "tool_parser",
    "draft_source_model": "draft_model",
    "otlp_traces_endpoint": "otel_exporter_otlp_endpoint",
}

# Flags that take no value where their guides type them (vLLM's store_true flags).
VALUELESS = frozenset({"trust_remote_code", "metrics_enable", "disable_log_requests", "disable_log_stats",
                       "enable_auto_tool_choice", "enable_lora", "enforce_eager", "disable_custom_all_reduce"})
# Accepted because they change nothing here, with why.
NO_EFFECT = {
    "trust_remote_code": "OpenVINO models run no code of their own",
    "metrics_enable": "metrics are always served on /metrics",
    "disable_log_stats": "there are no periodic stats lines to disable",
    "enable_auto_tool_choice": "tool_choice 'auto' is served for every model whose chat template takes tools",
    "enable_lora": "the adapters --lora-modules names are served",
    "enforce_eager": "the OpenVINO engine compiles its model once; there are no CUDA graphs to turn off",
    "disable_custom_all_reduce": "one engine process serves a model: nothing is reduced across devices",
    "gpu_memory_utilization": "the KV cache is sized by --cache_size (GB)",
    "swap_space": "the KV cache has no CPU swap space",
    "block_size": "the engine's KV blocks are its own (32 tokens on a CPU)",
    "max_seq_len_to_capture": "there are no CUDA graphs to capture",
}

# Flags this server cannot honour, and why.
REFUSED = {
    "grpc_bind_address": "the KServe gRPC API is not served; the OpenAI and OVMS REST APIs are (--rest_port)",
    "grpc_workers": "the KServe gRPC API is not served",
    "max_prompt_len": "it is an NPU option, and NPU is not supported",
    "model_distribution_policy": "tensor and pipeline parallelism across devices are not offered",
    "cache_interval_multiplier": "the KV cache is sized by --cache_size",
    "enable_tool_guided_generation": "with tool_choice 'auto' the model is free to answer in text; tool_choice "
                                     "'required' or a named function forces a call by grammar",
    "rest_workers": "one HTTP process serves every request (the engine batches them)",
    "quantization": "weights are quantized when a model is prepared (python -m ovgenai_models) or at load "
                    "(--enable_quantized_weights)",
}

# vLLM's --dtype names -> the CPU inference precision.
DTYPES = {"auto": "auto", "bfloat16": "bf16", "float16": "f16", "half": "f16", "float32": "f32", "float": "f32"}
TASKS = ("text_generation", "text-generation", "generate")
PIPELINE_TYPES = ("AUTO", "LM_CB")


class CLIError(ValueError):
    """A flag that cannot be honoured; the message names it."""


class Unrecognized(CLIError):
    """A flag no guide knows: said as vLLM's command line (argparse) says it."""


def boolean_settings(settings_class: type[BaseModel]) -> frozenset[str]:
    """The settings that are switches, by their flag names."""
    return frozenset(name for name, field in settings_class.model_fields.items() if field.annotation is bool)


def known_settings(settings_class: type[BaseModel]) -> frozenset[str]:
    """Every setting's flag names: its own and its aliases'."""
    names: set[str] = set()
    for name, field in settings_class.model_fields.items():
        names.add(name)
        alias = field.validation_alias
        choices = getattr(alias, "choices", [alias] if isinstance(alias, str) else [])
        names.update(str(choice).lower() for choice in choices if isinstance(choice, str))
    return frozenset(names)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("ov-genai-stack")
    except PackageNotFoundError:
        return "unknown"


def _snake(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _value_follows(args: list[str], index: int) -> bool:
    return index + 1 < len(args) and not args[index + 1].startswith("--")


def translate(argv: Iterable[str], booleans: Iterable[str], known: Iterable[str] | None = None) -> list[str]:
    """`argv` as the settings' own flags (`--name value` pairs); `booleans` are the settings that are flags, `known`
    every setting's name (a flag that is none of them, nor a guide's, is unrecognized)."""
    args, booleans = list(argv), frozenset(booleans)
    if "-h" in args or "--help" in args:  # the settings' own help, whatever else was typed
        return ["--help"]
    if known is not None:
        _recognized(args, frozenset(known) | booleans)
    if args and args[0] == "serve":  # vLLM: `vllm serve MODEL [options]`
        args = args[1:]
        if args and not args[0].startswith("-"):
            args = ["--model", args[0], *args[1:]]
    pairs: list[tuple[str, str]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("--"):
            raise CLIError(f"Unexpected argument '{arg}'.")
        flag, has_value, value = arg.partition("=")
        name = _snake(flag)
        negated = name.startswith("no_") and (name[3:] in booleans or RENAMED.get(name[3:]) in booleans)
        if negated:
            name, value = name[3:], "false"
        elif not has_value:
            if _value_follows(args, index):
                index += 1
                value = args[index]
            elif name in booleans or RENAMED.get(name) in booleans:
                value = "true"
            elif name in VALUELESS:
                value = ""
            else:
                raise CLIError(f"'{flag}' needs a value.")
        # A list-valued flag (vLLM's --served-model-name a b): the rest of the names follow.
        extra = []
        while _value_follows(args, index):
            index += 1
            extra.append(args[index])
        if name == "lora_modules":  # vLLM's `name=path` items (or JSON objects), one value per adapter
            pairs.append((name, value if value.lstrip().startswith("[") and not extra else json.dumps([value, *extra])))
            index += 1
            continue
        pairs.append((name, value if not extra else " ".join([value, *extra])))
        if extra and name != "served_model_name":
            raise CLIError(f"'{flag}' takes one value, got {len(extra) + 1}.")
        index += 1
    return _settings_flags(pairs)


def _recognized(args: list[str], known: frozenset[str]) -> None:
    guides = RENAMED.keys() | VALUELESS | NO_EFFECT.keys() | REFUSED.keys() | {
        "task", "pipeline_type", "tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype", "dtype",
        "api_key_file", "speculative_config"}
    unknown = [arg.partition("=")[0] for arg in args if arg.startswith("--")
               and (name := _snake(arg.partition("=")[0]).removeprefix("no_")) not in known and name not in guides
               and _snake(arg.partition("=")[0]) not in known]
    if unknown:
        raise Unrecognized(f"unrecognized arguments: {' '.join(unknown)}")


def notes(argv: Iterable[str]) -> list[str]:
    """One line for each flag that is accepted but means nothing on this engine, saying why."""
    names = [_snake(arg.partition("=")[0]) for arg in argv if arg.startswith("--")]
    return [f"--{name.replace('_', '-')} has no effect here: {NO_EFFECT[name]}" for name in dict.fromkeys(names)
            if name in NO_EFFECT]


def _settings_flags(pairs: list[tuple[str, str]]) -> list[str]:
    names = {name for name, _ in pairs}
    out: list[str] = []
    for name, value in pairs:
        if name in REFUSED:
            raise CLIError(f"'--{name}' is not supported: {REFUSED[name]}.")
        if name in NO_EFFECT or name == "disable_log_requests":
            continue
        if name == "port" and "rest_port" in names:
            raise CLIError("'--port' is OVMS's gRPC port, and the KServe gRPC API is not served: drop it; the REST "
                           "API is served on --rest_port.")
        if name == "task":
            if value not in TASKS:
                raise CLIError(f"'--task {value}' is not served here: this server generates text "
                               "(the embedding service serves embeddings and rerank).")
            continue
        if name == "pipeline_type":
            if value.upper() not in PIPELINE_TYPES:
                raise CLIError(f"'--pipeline_type {value}' is not supported: models are served with continuous "
                               f"batching ({' or '.join(PIPELINE_TYPES)}).")
            continue
        if name in ("tensor_parallel_size", "pipeline_parallel_size"):
            if value != "1":
                raise CLIError(f"'--{name} {value}' is not supported: a model is served by one engine process.")
            continue
        if name == "kv_cache_dtype":
            if value != "auto":
                raise CLIError(f"'--kv-cache-dtype {value}' is not supported; use --kv_cache_precision (u8, u4, f16, "
                               "bf16, f32).")
            continue
        if name == "dtype":
            if value not in DTYPES:
                raise CLIError(f"'--dtype {value}' is not supported; choose one of {', '.join(DTYPES)}.")
            name, value = "inference_precision", DTYPES[value]
        elif name == "api_key_file":  # OVMS: the key is the first line of a file
            name, value = "api_key", _first_line(value)
        elif name == "served_model_name" and " " in value:
            raise CLIError("'--served-model-name' takes one name here (a model is served under one name).")
        elif name == "device":
            value = "CPU" if value.lower() in ("cpu", "openvino") else value
        elif name == "speculative_config":
            out += _speculative(value)
            continue
        out += [f"--{RENAMED.get(name, name)}", value]
    return out


def _speculative(value: str) -> list[str]:
    """vLLM's --speculative-config: a draft `model` (or method "ngram": prompt lookup decoding) and its
    num_speculative_tokens."""
    try:
        config = json.loads(value)
    except ValueError as error:
        raise CLIError(f"'--speculative-config' is not JSON: {error}.") from error
    if not isinstance(config, dict):
        raise CLIError("'--speculative-config' must be a JSON object.")
    unknown = sorted(set(config) - {"model", "method", "num_speculative_tokens"})
    if unknown:
        raise CLIError(f"'--speculative-config': {', '.join(unknown)} not supported (model, method 'ngram' or "
                       "'draft_model', num_speculative_tokens).")
    flags = []
    if config.get("method") == "ngram":
        flags += ["--prompt_lookup", "true"]
    elif config.get("method", "draft_model") != "draft_model" or "model" not in config:
        raise CLIError("'--speculative-config' needs a draft 'model' (or method 'ngram', prompt lookup decoding); "
                       f"method '{config.get('method')}' is not supported.")
    else:
        flags += ["--draft_model", str(config["model"])]
    if "num_speculative_tokens" in config:
        flags += ["--num_speculative_tokens", str(config["num_speculative_tokens"])]
    return flags


def _first_line(path: str) -> str:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise CLIError(f"'--api_key_file': cannot read '{path}': {error.strerror}.") from error
    if not lines or not lines[0].strip():
        raise CLIError(f"'--api_key_file': '{path}' has no key on its first line.")
    return lines[0].strip()
