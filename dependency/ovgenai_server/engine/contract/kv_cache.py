"""The KV cache's size when the settings leave it to the server (cache_size 0).

On a CPU, openvino_genai grows a cache of unset size without looking at free memory, so the server sizes it at
start: room for `max_num_seqs` sequences of the full context, but never more than a quarter of the memory that is
available once the weights are loaded, and at least 1 GB. A small model gets what its batch can use; a large one
gets a share of the machine that leaves the rest to the weights, the other services and the page cache. On a GPU
openvino_genai's own dynamic allocation already checks the device's free memory, so the size stays unset there.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path
from typing import Any

from ovgenai_models.repository import language_model_xml

log = logging.getLogger(__name__)

GB = 1024**3
MEMORY_SHARE = 0.25
# Bytes per cached element; the CPU plugin's default KV precision is u8 (its per-block scales are negligible).
ELEMENT_BYTES = {None: 1.0, "u4": 0.5, "u8": 1.0, "f16": 2.0, "bf16": 2.0, "f32": 4.0}


@cache  # read once per model, however many scheduler configurations and capacities are worked out from it
def kv_elements_per_token(model_xml: Path) -> int | None:
    """Keys and values cached per token, over all layers: the model's state variables are
    [batch, kv_heads, tokens, head_size] each. None when the IR does not say (or is not an IR)."""
    if model_xml.suffix != ".xml" or not model_xml.is_file():
        return None
    import openvino

    model = openvino.Core().read_model(model_xml)  # the weights are memory-mapped, not read
    total = 0
    for op in model.get_ops():
        if op.get_type_name() == "ReadValue":
            shape = op.get_output_partial_shape(0)
            if shape.rank.is_static and shape.rank.get_length() == 4 and shape[1].is_static and shape[3].is_static:
                total += shape[1].get_length() * shape[3].get_length()
    return total or None


def available_memory(meminfo: str | None = None, cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """Bytes this process may still use: the kernel's MemAvailable, or less under a container's memory limit."""
    if meminfo is None:
        meminfo = Path("/proc/meminfo").read_text()
    fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in meminfo.splitlines() if len(line.split()) > 1}
    available = fields.get("MemAvailable", fields.get("MemFree", 0))  # kernels before 3.14 lack MemAvailable
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            available = min(available, int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass  # no cgroup v2 memory controller here: MemAvailable is the limit
    return max(available, 0)


def auto_cache_gb(
    elements_per_token: int | None, kv_precision: str | None, max_num_seqs: int, max_context: int,
    available: int, weights: int,
) -> int:
    """Whole GB (openvino_genai's unit), as the module docstring says."""
    share = MEMORY_SHARE * max(available - weights, 0)
    wanted = share
    if elements_per_token:
        wanted = elements_per_token * ELEMENT_BYTES.get(kv_precision, 1.0) * max_num_seqs * max_context
    return max(1, int(min(wanted, share) // GB))


def _folder(model_path: Path) -> Path:
    return model_path.parent if model_path.suffix == ".gguf" else model_path


def weights_bytes(model_path: Path) -> int:
    folder = _folder(model_path)
    return sum(f.stat().st_size for f in folder.glob("*.bin")) + sum(f.stat().st_size for f in folder.glob("*.gguf"))


def memory_refusal(model_path: Path, cache_size: float, device: str, available: int | None = None) -> str | None:
    """Why a model would not fit in the memory left (its weights and its KV cache: `cache_size` GB, or the 1 GB an
    unset size takes at least), with the numbers; None when it fits, or off a CPU (a GPU's driver says for itself)."""
    if not device.startswith("CPU"):
        return None
    weights = weights_bytes(model_path)
    cache = int(cache_size * GB) if cache_size else GB
    available = available_memory() if available is None else available
    if weights + cache <= available:
        return None
    return (f"it needs about {(weights + cache) / GB:.1f} GiB (weights {weights / GB:.1f} GiB, KV cache "
            f"{cache / GB:.1f} GiB) and {available / GB:.1f} GiB are available")


def cache_size_for(model_path: Path, kv_precision: str | None, max_num_seqs: int, max_context: int) -> int:
    weights = weights_bytes(model_path)
    folder = _folder(model_path)
    elements = kv_elements_per_token(language_model_xml(folder))
    size = auto_cache_gb(elements, kv_precision, max_num_seqs, max_context, available_memory(), weights)
    log.info("KV cache: %d GB (room for %s tokens per GB; a quarter of the memory available at most)", size,
             f"{GB // int(elements * ELEMENT_BYTES.get(kv_precision, 1.0)):,}" if elements else "unknown")
    return size


CPU_BLOCK_TOKENS = 32  # the CPU plugin's KV block


def capacity_tokens(scheduler: Any, model_path: Path, kv_precision: str | None, device: str) -> int | None:
    """Tokens the KV cache of `scheduler` holds, all sequences together; None where it grows by itself (a GPU's
    unset size) or the model does not say what a token costs."""
    if not device.startswith("CPU"):
        return None
    if scheduler.num_kv_blocks:
        return int(scheduler.num_kv_blocks) * CPU_BLOCK_TOKENS
    elements = kv_elements_per_token(language_model_xml(_folder(model_path)))
    if not scheduler.cache_size or not elements:
        return None
    return int(scheduler.cache_size * GB // (elements * ELEMENT_BYTES.get(kv_precision, 1.0)))
