"""f32 or bf16 for the embedding model, chosen by timing both on the CPU in hand where either could be faster.

OpenVINO computes bf16 on CPUs with AVX-512 (natively with AVX512_BF16 or AMX, emulated without). With AMX bf16 is
far ahead and OpenVINO's own default, and on AVX2-only CPUs a bf16 hint computes in f32, so neither needs a
measurement. Between the two, which is faster depends on the CPU: an AVX-512 EPYC embeds faster in bf16, a Xeon
with AVX512_BF16 but no AMX faster in f32 (bench/results.md). So with the `auto` precision on such a CPU, the
service loads the model in both and keeps the one that embeds a short batch faster (best of a few calls each,
alternating, so that a drifting VM hits both alike). Both are loaded while they are timed, so a start briefly holds
the model twice; the batch is kept small so that a model of a few hundred million parameters takes seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ovgenai_common.cpu import InferencePrecision, computed_precision, cpu_has_amx, precision_hint

logger = logging.getLogger(__name__)

CANDIDATES = ("bf16", "f32")

# A small batch of ordinary words: 4 texts of ~70 tokens (timed, never returned).
_WORDS = ("the report describes how the service stores each document, splits it into passages and answers "
          "questions about them with the sources it found, measured over several weeks of traffic").split()
SAMPLE = [" ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(60)) for i in range(4)]


def worth_timing(device: str, precision: InferencePrecision, plugin_config: dict[str, Any],
                 has_amx: bool | None = None, bf16_computes_in: Callable[[], str] | None = None) -> bool:
    """Whether `auto` leaves a real choice: a CPU device, no precision forced by setting or plugin config, no AMX,
    and a bf16 hint computed in bf16 (not turned into f32)."""
    if precision != "auto" or "INFERENCE_PRECISION_HINT" in plugin_config:
        return False
    # auto's own rule (cpu.py): f32 is what it asks of a CPU without AMX; OpenVINO's bf16 elsewhere stands
    if precision_hint(device, precision, cpu_has_amx() if has_amx is None else has_amx) != "f32":
        return False
    try:
        return (bf16_computes_in or (lambda: computed_precision(device, "bf16")))() == "bf16"
    except Exception as error:  # a failed probe leaves the safe default (f32)
        logger.debug("could not read what bf16 computes in on %s: %s", device, error)
        return False


def faster_precision(load: Callable[[str], Any], embed: Callable[[Any, list[str]], Any], rounds: int = 3,
                     clock: Callable[[], float] = time.perf_counter) -> tuple[str, Any, dict[str, float]]:
    """(the faster hint, its loaded pipeline, texts per second by hint). `load(hint)` builds a pipeline, `embed`
    runs one batch on it. The slower pipeline is dropped before this returns. A precision the model cannot be
    loaded or run in is left out (logged), so that the timing never stops a model f32 alone would serve; when both
    fail, the f32 error is raised."""
    pipelines: dict[str, Any] = {}
    for hint in CANDIDATES:
        try:
            pipeline = load(hint)
            embed(pipeline, SAMPLE)  # the first call of a shape compiles its kernels
        except Exception as error:
            if hint == CANDIDATES[-1] and not pipelines:
                raise
            logger.warning("embedding: the model does not run in %s (%s); left out of the timing", hint, error)
            continue
        pipelines[hint] = pipeline
    if len(pipelines) == 1:
        [(hint, pipeline)] = pipelines.items()
        return hint, pipeline, {}
    best = dict.fromkeys(pipelines, float("inf"))
    for _ in range(rounds):
        for hint, pipeline in pipelines.items():
            start = clock()
            embed(pipeline, SAMPLE)
            best[hint] = min(best[hint], clock() - start)
    rates = {hint: len(SAMPLE) / seconds for hint, seconds in best.items()}
    chosen = max(rates, key=rates.__getitem__)
    return chosen, pipelines.pop(chosen), rates
