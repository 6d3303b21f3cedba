"""The backend's settings: CLI flags and environment variables, with the names users of vLLM's OpenVINO backend
and of OVMS already know."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, BeforeValidator, Field, field_validator
from pydantic_settings import NoDecode

from ovgenai_common.cpu import InferencePrecision
from ovgenai_common.settings import (
    PRECISION_HELP,
    JsonObject,
    KVCachePrecision,
    ReasoningParserName,
    ResponseStoreSettings,
    ServiceSettings,
    ToolParserName,
)

from .engine.api_process.placement import ServingCore
from .engine.contract.cache_eviction import CacheEvictionConfig
from .models.lora import LoraModule, parse_lora_modules

# vLLM's --lora-modules: `name=path` items, space-separated, or JSON objects (a JSON list of either).
LoraModules = Annotated[list[LoraModule], NoDecode, BeforeValidator(parse_lora_modules)]


def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class BackendSettings(ResponseStoreSettings, ServiceSettings):
    port: int = Field(8008, ge=0, le=65535, description="Port to listen on.")
    model: str = Field(
        "models",
        validation_alias=_alias("model", "MODEL_PATH", "LLM_MODEL_PATH"),
        description="An OpenVINO IR folder, a .gguf file, or an OVMS model repository (folder or config.json).",
    )
    source_model: str | None = Field(
        None,
        description="A model to fetch and prepare before serving, as OVMS's --source_model: a Hugging Face Hub id "
        "(OpenVINO IR as it is, one GGUF file as 'owner/name:Q4_K_M', a checkpoint exported) or a local checkpoint or "
        ".gguf; prepared into model_repository_path and served under its id. A Hub id given as --model (vLLM's "
        "'serve owner/name') is taken the same way.",
    )
    model_repository_path: Path | None = Field(
        None, description="Where source_model is prepared (an OVMS model repository); default: <cache_dir>/models."
    )
    revision: str | None = Field(None, description="With a Hub model: the branch, tag or commit to fetch.")
    pull: bool = Field(False, description="Prepare source_model and exit without serving (OVMS's --pull).")
    served_model_name: str | None = Field(
        None,
        validation_alias=_alias("served_model_name", "SERVED_MODEL_NAME"),
        description="Name clients use in 'model' (single-model mode); default: the folder or file name.",
    )
    device: str = Field(
        "CPU",
        validation_alias=_alias("device", "VLLM_OPENVINO_DEVICE", "target_device"),
        description="OpenVINO device: CPU, GPU, GPU.1, AUTO, ...",
    )
    cache_size: float = Field(
        0,
        ge=0,
        validation_alias=_alias("cache_size", "kv_cache_space", "VLLM_OPENVINO_KVCACHE_SPACE"),
        description="KV-cache size in GB; 0 sizes it from the model and the memory available.",
    )
    kv_cache_precision: KVCachePrecision | None = Field(
        None,
        validation_alias=_alias(
            "kv_cache_precision", "VLLM_OPENVINO_KV_CACHE_PRECISION", "VLLM_OPENVINO_CPU_KV_CACHE_PRECISION"
        ),
        description="KV-cache precision; default: the device's own choice.",
    )
    enable_quantized_weights: bool = Field(
        False,
        validation_alias=_alias("enable_quantized_weights", "VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS"),
        description="Compress fp16/fp32 IR weights to int8 at load (cached next to the model; needs nncf).",
    )
    quantized_weights: Literal["int8", "int4"] = Field(
        "int8", description="With enable_quantized_weights: the weights' format (int4: NNCF's asymmetric int4, groups "
        "of 128)."
    )
    cache_dir: Path = Field(
        Path.home() / ".cache" / "ovgenai",
        validation_alias=_alias("cache_dir", "OVGENAI_CACHE_DIR"),
        description="Where derived models (int8 weights from enable_quantized_weights) are cached.",
    )
    # 512: the best throughput and latency of bench/tune.py's sweep on 2 cores (bench/results.md); autotune may pick
    # another for the CPU in hand.
    max_num_batched_tokens: int = Field(512, ge=1, description="Tokens scheduled per engine step.")
    max_num_seqs: int = Field(256, ge=1, description="Sequences batched together at most.")
    dynamic_split_fuse: bool = Field(True, description="Split long prompts across steps (chunked prefill).")
    enable_prefix_caching: bool = Field(True, description="Reuse the KV cache of shared prompt prefixes.")
    max_tokens_limit: int = Field(4096, ge=1, description="Longest prompt + completion accepted, in tokens.")
    best_of_limit: int = Field(20, ge=1, description="Largest 'best_of' (beam width) accepted.")
    max_n: int = Field(16, ge=1, description="Largest 'n' accepted.")
    max_waiting_requests: int = Field(
        512, ge=0, description="Sequences allowed to wait beyond max_num_seqs; past them (or past a client's share of "
        "them, when others wait) the server answers 429.",
    )
    max_queue_wait: float = Field(
        60.0, ge=0, description="Seconds a request may be expected to wait for its first token (the prompts ahead "
        "of it computed at the rate autotune measured for the model); one expected to wait longer is refused at once "
        "with 429 and a Retry-After header. 0: no limit. Needs autotune (the rate).",
    )
    autotune: bool = Field(
        True, description="On a model's first start on a CPU, a short in-process sweep picks max_num_batched_tokens "
        "and the KV-cache precision (those not set) and measures the prompt rate max_queue_wait uses; cached per "
        "model and CPU under cache_dir. --no-autotune: the defaults, and no wait limit.",
    )
    autotune_seconds: float = Field(30.0, gt=0, le=60, description="The sweep's time budget.")
    grammar_compile_timeout: float = Field(
        10.0, gt=0, description="Seconds a request's grammar (response_format, tool_choice, vLLM's fields) may take "
        "to compile, counted from when its compile starts; a slower one is a 400. Grammars compile in the engine "
        "process off its step, a cheap one beside the rest, which go one at a time, cheapest first; a client that "
        "finds 8 waiting in its lane gets a 429 with Retry-After.",
    )
    grammar_cache_size: int = Field(
        32, ge=1, description="Compiled grammars the engine keeps, so that a repeated one is not compiled again "
        "(each takes about a megabyte per 40,000 tokens of vocabulary); past it, they are all dropped.",
    )
    inference_precision: InferencePrecision = Field("auto", description=PRECISION_HELP)
    serving_core: ServingCore = Field(
        "auto", description="reserved: the engine computes on every core this process may use but the last, which "
        "serves HTTP, tokenizes and frames streams (a step waits for its slowest thread, so a shared core slows every "
        "step); shared: everything on every core; auto: reserved from 8 cores.",
    )
    prompt_lookup: bool = Field(
        False,
        validation_alias=_alias("prompt_lookup", "PROMPT_LOOKUP"),
        description="Prompt lookup decoding: draft tokens are copied from the prompt and checked in one step, which "
        "speeds up answers that quote their context (RAG); one sequence per request (no n > 1 or best_of). Per model: "
        "plugin_config {\"prompt_lookup\": true} in its graph.pbtxt, as in OVMS.",
    )
    draft_model: Path | None = Field(
        None,
        validation_alias=_alias("draft_model", "draft_models_path", "speculative_model", "DRAFT_MODEL_PATH"),
        description="Speculative decoding: a smaller model of the same tokenizer (an OpenVINO IR folder or a .gguf) "
        "proposes num_speculative_tokens tokens that the model checks in one step, which speeds up one stream when "
        "the draft guesses well; one sequence per request (no n > 1 or best_of). Per model: draft_models_path in its "
        "graph.pbtxt, as in OVMS.",
    )
    num_speculative_tokens: int = Field(
        5, ge=1, le=64, description="With draft_model: the tokens it proposes per step (a request's "
        "num_assistant_tokens, OVMS's name, overrides it).",
    )
    lora_modules: LoraModules = Field(
        default_factory=list,
        validation_alias=_alias("lora_modules", "LORA_MODULES"),
        description="LoRA adapters served as models of their own, as vLLM's --lora-modules: 'name=path' (a PEFT "
        "adapter folder or its .safetensors), several space-separated, or JSON '{\"name\": ..., \"path\": ..., "
        "\"base_model_name\": ...}'. Each is its base model's engine with the adapter built in (fused into f32/f16 "
        "weights, beside compressed ones): it costs the memory of another model and its KV cache. The base model "
        "needs Hugging Face weight names (an IR exported from a Transformers checkpoint, not a GGUF).",
    )
    cache_eviction_config: CacheEvictionConfig | None = Field(
        None, description="KV-cache eviction for contexts longer than the cache (OVMS's option, the same fields), as "
        "JSON: '{\"start_size\": 32, \"recent_size\": 128, \"max_cache_size\": 672}' (tokens, multiples of 32; "
        "aggregation_mode SUM or NORM_SUM, apply_rotation, snapkv_window_size, kv_crush_config). Off by default: "
        "eviction trades some accuracy for length. Per model: cache_eviction_config in its graph.pbtxt.",
    )
    tool_parser: ToolParserName | None = Field(
        None, description="The format the model writes tool calls in: hermes3 (<tool_call> blocks; vLLM's 'hermes'), "
        "llama3 (JSON; vLLM's 'llama3_json'), pythonic, or auto; default: read from its chat template. Per model: "
        "tool_parser in its graph.pbtxt, as in OVMS.",
    )
    reasoning_parser: ReasoningParserName | None = Field(
        None, description="Separate a thinking model's <think> reasoning from its answer (reasoning_content): qwen3, "
        "deepseek_r1 or phi4. Per model: reasoning_parser in its graph.pbtxt, as in OVMS.",
    )
    chat_template: str | None = Field(
        None, description="A chat template for every model served, as vLLM's --chat-template: a Jinja file, or the "
        "template itself; over each model's own (template.jinja, chat_template.jinja, tokenizer_config.json).",
    )
    seed: int | None = Field(
        None, description="vLLM's --seed: requests that set no seed of their own are seeded from this one in the "
        "order they arrive, so a run of the same requests samples the same answers.",
    )
    generation_config: str = Field(
        "auto", description="Where a request's unset sampling fields (temperature, top_p, top_k, min_p, "
        "repetition_penalty, max_tokens) take their defaults from, as vLLM's --generation-config: auto, the model's "
        "own generation_config.json; vllm or none, the engine's (temperature 1, every token); or a folder (or a "
        "generation_config.json file) of your own. /v1/models says what applies to each model.",
    )
    file_system_poll_wait_seconds: float = Field(
        1.0, ge=0, description="How often a model repository's config.json and graph.pbtxt files are checked for "
        "changes (OVMS's flag): a change loads new models, reloads changed ones and unloads removed ones while the "
        "others serve (POST /v1/config/reload does it at once). 0: not watched.",
    )
    idle_unload_s: float = Field(
        0, ge=0, description="Seconds a model may go without requests before its engine is unloaded to free its "
        "memory; the next request naming it loads it again and waits for it. 0: models stay loaded.",
    )
    plugin_config: JsonObject = Field(
        default_factory=dict, description="OpenVINO properties, as a JSON object, e.g. '{\"NUM_STREAMS\": 1}'."
    )

    @field_validator("draft_model", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # compose's unset variable

    @field_validator("device")
    @classmethod
    def _upper_device(cls, value: str) -> str:
        return value.strip().upper()
