"""KV-cache eviction for long contexts: OVMS's `cache_eviction_config`, the same fields and defaults.

With eviction, each sequence keeps at most `max_cache_size` tokens of KV cache: the first `start_size` and the last
`recent_size` always, and between them the tokens the attention scores most (openvino_genai's algorithm). A context
longer than the cache can hold then completes, at some cost in accuracy; without it openvino_genai drops a sequence
that outgrows the cache. The sizes must be whole KV blocks (32 tokens on a CPU; a GPU's 16 divide them too), which
openvino_genai checks only when the pipeline is built: checked here when the settings are read instead.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

BLOCK = 32


class KVCrushConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget: int = Field(0, ge=0)
    anchor_point_mode: Literal["RANDOM", "ZEROS", "ONES", "MEAN", "ALTERNATING"] = "RANDOM"
    rng_seed: int = Field(0, ge=0)


class CacheEvictionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_size: int = Field(ge=BLOCK)
    recent_size: int = Field(ge=BLOCK)
    max_cache_size: int
    aggregation_mode: Literal["SUM", "NORM_SUM"] = "NORM_SUM"
    apply_rotation: bool = False
    snapkv_window_size: int = Field(8, ge=0)
    kv_crush_config: KVCrushConfig | None = None

    @model_validator(mode="after")
    def _whole_blocks(self) -> CacheEvictionConfig:
        for name in ("start_size", "recent_size", "max_cache_size"):
            if getattr(self, name) % BLOCK:
                raise ValueError(f"{name} must be a multiple of the KV block size ({BLOCK} tokens)")
        if self.max_cache_size <= self.start_size + self.recent_size:
            raise ValueError("max_cache_size must be larger than start_size + recent_size")
        return self

    def to_openvino(self) -> Any:
        import openvino_genai

        crush = self.kv_crush_config
        kwargs: dict[str, Any] = {}
        if crush is not None:
            kwargs["kvcrush_config"] = openvino_genai.KVCrushConfig(
                crush.budget, getattr(openvino_genai.KVCrushAnchorPointMode, crush.anchor_point_mode), crush.rng_seed
            )
        return openvino_genai.CacheEvictionConfig(
            self.start_size, self.recent_size, self.max_cache_size,
            getattr(openvino_genai.AggregationMode, self.aggregation_mode), self.apply_rotation,
            self.snapkv_window_size, **kwargs,
        )
