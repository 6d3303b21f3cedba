"""CPU inference precision: OpenVINO picks bf16 on any CPU with AVX512-BF16, but without AMX tiles bf16 runs
slower than f32 there. Measured on this project's 2-core AVX512-BF16 machine (no AMX): all-MiniLM-L6-v2
embeds ~30 passages/s in bf16 and ~60 in f32; SmolLM2-135M decodes ~308 tokens/s in bf16 and ~334 in f32.
So on CPUs without AMX, f32 is requested unless the user chose a precision."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def cpu_has_amx() -> bool:
    try:
        return "amx_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return True  # unknown: leave OpenVINO's own choice


def default_properties(device: str, properties: dict | None = None) -> dict:
    """`properties` plus an f32 precision hint for CPUs without AMX, unless a hint is already given."""
    chosen = dict(properties or {})
    if device.upper().startswith("CPU") and "INFERENCE_PRECISION_HINT" not in chosen and not cpu_has_amx():
        chosen["INFERENCE_PRECISION_HINT"] = "f32"
    return chosen
