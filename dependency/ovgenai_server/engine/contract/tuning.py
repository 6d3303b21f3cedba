"""What autotune plans for a model and what it found: carried on the model's spec (the plan) and sent back to the API
process with `Ready` (the tuning), so they live apart from the sweep itself (autotune.py)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

# Options the sweep may choose, each only where the user left it unset.
TUNABLE = ("max_num_batched_tokens", "kv_cache_precision")


class Trial(msgspec.Struct, frozen=True):
    """One candidate configuration, as measured on the sweep's batch."""

    max_num_batched_tokens: int
    kv_cache_precision: str | None  # None: the device's own choice
    seconds: float  # the batch, start to last token
    prefill_tokens_per_s: float  # the batch's prompt tokens over the time to the last first token


class Tuning(msgspec.Struct):
    """What the sweep chose for a model on this CPU; sent to the API process with `Ready`, cached as JSON."""

    max_num_batched_tokens: int
    kv_cache_precision: str | None
    prefill_tokens_per_s: float  # prompt tokens the chosen configuration computes per second under a batch
    trials: list[Trial]
    seconds: float  # the sweep's own duration
    note: str  # what was decided, and why
    cpu: str
    cached: bool = False  # read from the cache at this start

    def describe(self) -> str:
        kv = self.kv_cache_precision or "the device's own"
        source = "cached" if self.cached else f"swept in {self.seconds:.0f} s"
        return (f"max_num_batched_tokens {self.max_num_batched_tokens}, KV cache {kv}, prompts at "
                f"{self.prefill_tokens_per_s:.0f} tokens/s ({source}): {self.note}")


@dataclass(frozen=True)
class AutotunePlan:
    """Which options a model's sweep may choose, and its time budget."""

    options: tuple[str, ...]
    seconds: float
