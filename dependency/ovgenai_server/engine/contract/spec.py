"""Everything needed to build one model's pipeline; picklable so it can be handed to the engine process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .weights import gguf_ir

if TYPE_CHECKING:
    from ovgenai_common.cpu import InferencePrecision

    from .cache_eviction import CacheEvictionConfig
    from .tuning import AutotunePlan


@dataclass(frozen=True)
class LoraAdapter:
    """A LoRA adapter built into an engine (ovgenai_server/lora.py): served under its own name, answering as
    `base` with the adapter applied."""

    file: Path  # the adapter's .safetensors
    base: str  # the served model it applies to
    fuse: bool  # added into the weights at compile time (AdapterConfig MODE_FUSE); else beside them (MODE_STATIC)

    def to_openvino(self) -> Any:
        import openvino_genai

        mode = openvino_genai.AdapterConfig.Mode
        return openvino_genai.AdapterConfig(openvino_genai.Adapter(str(self.file)),
                                            mode.MODE_FUSE if self.fuse else mode.MODE_STATIC)


@dataclass(frozen=True)
class ModelSpec:
    """No defaults here: every value comes from `BackendSettings` (model_specs.base_spec), then a model's own
    graph.pbtxt options, so the server's settings are the one source of each default. The engine options carry
    their settings' names."""

    name: str
    path: Path  # an OpenVINO IR folder or a .gguf file
    vision: bool  # a vision-language model (its prompts are text with images): read from its files once
    device: str
    cache_size: float  # GB
    kv_cache_precision: str | None
    max_num_batched_tokens: int
    max_num_seqs: int
    dynamic_split_fuse: bool
    enable_prefix_caching: bool
    max_tokens_limit: int
    best_of_limit: int
    plugin_config: dict[str, Any]
    inference_precision: InferencePrecision
    enable_quantized_weights: bool
    quantized_weights: str  # int8 or int4
    cache_dir: Path
    prompt_lookup: bool  # also on when plugin_config says {"prompt_lookup": true}, as OVMS's graphs do
    draft_model: Path | None  # speculative decoding's draft (an IR folder or .gguf); None: none
    num_speculative_tokens: int  # the draft's tokens per step, unless a request says (num_assistant_tokens)
    cache_eviction_config: CacheEvictionConfig | None  # KV-cache eviction (OVMS's option); None: off
    grammar_compile_timeout: float  # seconds a grammar may take to compile (engine/engine_process/grammar_worker.py)
    grammar_cache_size: int  # compiled grammars kept for the pipeline (engine/engine_process/grammar_worker.py)
    tool_parser: str | None  # the format of the model's tool calls (tool_calls.TOOL_PARSERS); None: from its template
    reasoning_parser: str | None  # reasoning.REASONING_PARSERS; None: the reasoning stays in the answer
    # Not a setting of its own: placed by the server for the cores it has (engine/api_process/placement.py); None: every
    # core.
    engine_cores: tuple[int, ...] | None = None
    # Not a setting either: the options the engine process's sweep may choose (engine/engine_process/autotune.py); None:
    # no sweep.
    autotune: AutotunePlan | None = None
    # Not a setting: a LoRA adapter served under this spec's name (--lora-modules); None: the model as it is.
    lora: LoraAdapter | None = None

    @property
    def folder(self) -> Path:
        return self.path.parent if self.path.suffix == ".gguf" else self.path

    def max_context(self) -> int:
        """The longest prompt + output the server accepts: the model's own limit, capped by max_tokens_limit (and,
        without split-fuse, by the token budget of one step)."""
        limit = self.max_tokens_limit
        if not self.dynamic_split_fuse:
            # Without split-fuse one step computes a whole prompt, or a whole sequence recomputed after a preemption;
            # the scheduler throws (and so stops the engine) for one longer than the step's token budget. As vLLM
            # without chunked prefill, cap the context at that budget.
            limit = min(limit, self.max_num_batched_tokens)
        config_file = self.folder / "config.json"
        if config_file.is_file():
            try:
                config = json.loads(config_file.read_text())
                # A vision-language model's limit is its language model's.
                model_limit = config.get("max_position_embeddings") or config.get("text_config", {}).get(
                    "max_position_embeddings")
                if model_limit:
                    limit = min(limit, int(model_limit))
            except (OSError, ValueError):
                pass
        return limit

    def scheduler_config(self) -> Any:
        import openvino_genai

        config = openvino_genai.SchedulerConfig()
        config.cache_size = max(1, round(self.cache_size)) if self.cache_size >= 1 else 0
        if self.cache_size == 0:
            if not self.device.startswith("GPU"):  # a GPU's cache grows within its free memory by itself
                from .kv_cache import cache_size_for

                config.cache_size = cache_size_for(self.path, self.kv_cache_precision, self.max_num_seqs,
                                                   self.max_context())
        elif config.cache_size == 0:
            # openvino_genai takes a cache below 1 GB only as a number of blocks (32 tokens each on a CPU): 1,000
            # blocks per 0.1 GB whatever the model, so that a small cache holds as many tokens for every model.
            config.num_kv_blocks = max(1, int(self.cache_size * 10_000))
        config.max_num_batched_tokens = self.max_num_batched_tokens
        config.max_num_seqs = self.max_num_seqs
        config.dynamic_split_fuse = self.dynamic_split_fuse
        config.enable_prefix_caching = self.enable_prefix_caching
        if self.cache_eviction_config is not None:
            config.use_cache_eviction = True
            config.cache_eviction_config = self.cache_eviction_config.to_openvino()
        return config

    def properties(self) -> dict[str, Any]:
        from ovgenai_common.cpu import default_properties

        props: dict[str, Any] = default_properties(self.device, self.plugin_config, self.inference_precision)
        if self.kv_cache_precision:
            props["KV_CACHE_PRECISION"] = self.kv_cache_precision
        if self.prompt_lookup:  # openvino_genai reads this key from the pipeline's properties
            props["prompt_lookup"] = True
        if self.engine_cores and self.device.startswith("CPU"):
            props.setdefault("INFERENCE_NUM_THREADS", len(self.engine_cores))
        return props

    def pipeline_properties(self) -> dict[str, Any]:
        """The serving pipeline's properties: `properties()`, a LoRA adapter, and, with a draft model, the draft on
        the same device with the same OpenVINO properties (built in the engine process: they are OpenVINO objects)."""
        props = self.properties()
        if self.lora is not None:  # applied in the step loop only when built in (models/lora.py)
            props["adapters"] = self.lora.to_openvino()
        if self.draft_model is not None:
            import openvino_genai

            draft = {key: value for key, value in props.items() if key != "prompt_lookup"}
            path = gguf_ir(self.draft_model, self.cache_dir) if self.draft_model.suffix == ".gguf" else self.draft_model
            props["draft_model"] = openvino_genai.draft_model(str(path), self.device, **draft)
        return props

    def describe(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "path": str(self.path),
                "device": self.device,
                "cache_size": self.cache_size,
                "kv_cache_precision": self.kv_cache_precision,
                "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens,
                "dynamic_split_fuse": self.dynamic_split_fuse,
                "enable_prefix_caching": self.enable_prefix_caching,
                "prompt_lookup": self.prompt_lookup,
                "draft_model": str(self.draft_model) if self.draft_model else None,
                "lora": {"file": str(self.lora.file), "base": self.lora.base, "fuse": self.lora.fuse}
                if self.lora else None,
                "cache_eviction_config": self.cache_eviction_config and self.cache_eviction_config.model_dump(),
                "engine_cores": self.engine_cores,
                "autotune": list(self.autotune.options) if self.autotune else None,
                "properties": self.properties(),
            }
        )
