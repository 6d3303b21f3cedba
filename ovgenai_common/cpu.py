"""CPU inference precision.

OpenVINO computes in bf16 on any CPU that advertises it; CPUs with AMX tiles run it far faster than f32, others
not always: on a Xeon without AMX bf16 was the slower of the two (bench/results.md, "CPU precision"). So the `auto`
precision requests f32 on CPUs without AMX and leaves OpenVINO's own choice (bf16) on CPUs with it. Other CPUs without
AMX differ (EPYCs embed faster in bf16), so the embedding service times both where bf16 is native
(ovgenai_services/embedding/precision.py).

`INFERENCE_PRECISION` (every service) forces one choice: `f32` is what a CPU without AMX gets, `bf16` what a CPU
with AMX gets. A hint is a request, not a guarantee: OpenVINO computes bf16 only on CPUs with AVX-512 (natively with
AVX512_BF16 or AMX, emulated with AVX-512 alone); on an AVX2-only CPU a bf16 hint runs in f32. `computed_precision`
asks OpenVINO what a hint becomes on the CPU in hand, and the services log it at start. An `INFERENCE_PRECISION_HINT`
in a plugin config wins over both.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger(__name__)

InferencePrecision = Literal["auto", "f32", "bf16", "f16"]


def cpuinfo_has_amx(cpuinfo: str) -> bool:
    return "amx_bf16" in cpuinfo


def cpu_flags() -> list[str]:
    """The CPU's model name and the flags that decide OpenVINO's kernels (AVX-512 variants, AMX), for reports."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return [model, *sorted(f for f in set(flags) if f.startswith(("avx512", "amx", "avx_vnni")))]


@cache
def cpu_has_amx() -> bool:
    try:
        return cpuinfo_has_amx(Path("/proc/cpuinfo").read_text())
    except OSError:
        return True  # unknown: leave OpenVINO's own choice


def precision_hint(device: str, precision: InferencePrecision, has_amx: bool) -> str | None:
    """The INFERENCE_PRECISION_HINT to request, or None to keep OpenVINO's default."""
    if precision != "auto":
        return precision
    if device.upper().startswith("CPU") and not has_amx:
        return "f32"
    return None


def default_properties(
    device: str, properties: dict | None = None, precision: InferencePrecision = "auto", has_amx: bool | None = None
) -> dict:
    """`properties` plus the precision hint chosen for this device, unless the properties already name one."""
    chosen = dict(properties or {})
    if "INFERENCE_PRECISION_HINT" not in chosen:
        hint = precision_hint(device, precision, cpu_has_amx() if has_amx is None else has_amx)
        if hint:
            chosen["INFERENCE_PRECISION_HINT"] = hint
    return chosen


@cache
def computed_precision(device: str, hint: str | None) -> str:
    """The precision OpenVINO computes in on `device` for a precision hint (None: the device's default), read back
    from a compiled model: on a CPU without bf16 arithmetic a bf16 hint comes back as f32."""
    import numpy as np
    import openvino
    from openvino import opset13 as ops

    x = ops.parameter([1, 8], openvino.Type.f32)
    model = openvino.Model([ops.matmul(x, ops.constant(np.ones((8, 8), np.float32)), False, False)], [x])
    compiled = openvino.Core().compile_model(model, device, {"INFERENCE_PRECISION_HINT": hint} if hint else {})
    return compiled_precision(compiled)


def compiled_precision(compiled: Any) -> str:
    """The precision a compiled model computes in ("bf16", "f32", "f16"), as its device reports it."""
    return compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()


def log_computed_precision(service: str, device: str, properties: dict) -> None:
    """One start-up line saying what the model computes in, and a warning where that is not what was asked for."""
    if not device.upper().startswith("CPU"):
        return
    hint = properties.get("INFERENCE_PRECISION_HINT")
    try:
        computed = computed_precision(device, str(hint) if hint else None)
    except Exception as error:  # an informative line only: never stop a service for it
        logger.debug("could not read the computed precision on %s: %s", device, error)
        return
    if hint and str(hint).lower() != computed:
        logger.warning("%s: %s computes in %s, not the %s asked for (this CPU has no %s arithmetic)", service,
                       device, computed, hint, hint)
    else:
        logger.info("%s: %s computes in %s", service, device, computed)
