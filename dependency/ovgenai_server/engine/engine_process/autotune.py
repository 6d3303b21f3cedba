"""The engine's configuration chosen for the CPU in hand, by a short in-process sweep on the model's first start.

The best step budget (`max_num_batched_tokens`) and KV-cache precision differ between AMX, AVX-512 and AVX2-only
CPUs, and so does how fast a model computes prompts, which admission needs to know (a request that would wait
minutes for its first token is refused at once with 429; engine/api_process/backlog.py). On first start for a model, the
engine process builds the pipeline with each candidate configuration, runs the same batch of prompts through it,
and keeps the fastest, but only when it beats the default by more than a short run's spread (NOISE_MARGIN): a
sweep must not swap the measured default for noise. An option the user set (flag, environment, graph.pbtxt,
plugin_config) is never swept. The candidates are measured in order until the budget is spent; a model too slow
here to compute the batch in half the budget keeps its defaults, and still gets its prompt rate measured.

The result is cached per model, CPU and engine options under `<cache_dir>/autotune`, so later starts and engine
restarts read it in milliseconds. `--no-autotune` turns all of it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from ..contract.spec import ModelSpec
from ..contract.tuning import AutotunePlan, Trial, Tuning

logger = logging.getLogger(__name__)

BATCH_BUDGETS = (512, 1024, 256, 2048)  # the default first: it is the reference every candidate must beat
# A candidate replaces the default only when this much faster: more than two runs of one configuration differ on a
# small VM (bench/results.md), so that the sweep never trades the default for noise.
NOISE_MARGIN = 1.05
# The batch each candidate computes: enough prompt tokens per step for the step budgets to differ, and a few
# decode steps, since serving interleaves both.
PROMPTS, PROMPT_TOKENS, OUTPUT_TOKENS = 8, 256, 16
WARM_UP_TOKENS = 32  # one short request after each build: a pipeline's first inference allocates and is slow
KV_BLOCK_TOKENS = 32


@dataclass(frozen=True)
class Candidate:
    max_num_batched_tokens: int
    kv_cache_precision: str | None


def candidates(spec: ModelSpec, options: tuple[str, ...], computed_precision: str) -> list[Candidate]:
    """The configurations to measure, most promising first (a slow CPU measures only the first few in its budget):
    the spec's own, the 16-bit KV cache at its budget, the other budgets, then those with the 16-bit KV cache.
    `computed_precision`: what the engine computes in on this CPU ("bf16", "f32"), as OpenVINO reports it."""
    budgets = [spec.max_num_batched_tokens]
    if "max_num_batched_tokens" in options:
        budgets += [b for b in BATCH_BUDGETS if b != spec.max_num_batched_tokens]
    kvs = [spec.kv_cache_precision]
    if "kv_cache_precision" in options and spec.kv_cache_precision is None:
        # The device's own (u8 on a CPU) against 16-bit. A bf16 cache only where the engine computes in bf16: the
        # CPU plugin's paged attention refuses a bf16 cache beside f32 compute ("expect kvcache type f32"), which
        # is what an AVX512_BF16 CPU without AMX computes in (ovgenai_common/cpu.py); f16 it converts.
        kvs.append("bf16" if computed_precision == "bf16" else "f16")
    ordered = [Candidate(budgets[0], kv) for kv in kvs]
    return ordered + [Candidate(b, kv) for kv in kvs for b in budgets[1:]]


def choose(trials: list[Trial]) -> tuple[Trial, str]:
    """The trial to serve with (the first, the default, unless another is NOISE_MARGIN faster), and why."""
    default = trials[0]
    best = min(trials, key=lambda trial: trial.seconds)
    if best is not default and default.seconds >= best.seconds * NOISE_MARGIN:
        gain = default.seconds / best.seconds
        return best, f"{gain:.2f}x the default's speed on the sweep's batch, of {len(trials)} configurations"
    if len(trials) == 1:
        return default, "the defaults kept: no other configuration was measured"
    return default, f"the defaults kept: none of {len(trials) - 1} others was {NOISE_MARGIN - 1:.0%} faster"


# ---- the cache ----------------------------------------------------------------------------------------------

def cpu_signature() -> dict[str, Any]:
    """What makes a measurement valid on another start: the CPU model, its vector extensions, the cores used."""
    from ovgenai_common.cpu import cpu_flags

    flags = cpu_flags() or [platform.processor()]
    return {"model": flags[0], "extensions": flags[1:], "cores": len(os.sched_getaffinity(0))}


def cache_key(spec: ModelSpec, plan: AutotunePlan) -> dict[str, Any]:
    import openvino_genai

    files = sorted(p for p in spec.folder.glob("*") if p.suffix in (".xml", ".bin", ".gguf", ".json"))
    return {
        "model": str(spec.path.resolve()),
        "files": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files],
        "openvino_genai": openvino_genai.__version__,
        "cpu": cpu_signature(),
        "device": spec.device,
        "properties": {k: str(v) for k, v in _sweep_properties(spec).items()},
        "options": list(plan.options),
        "fixed": [spec.max_num_batched_tokens, spec.kv_cache_precision, spec.dynamic_split_fuse],
        "quantized": [spec.enable_quantized_weights, spec.quantized_weights],
        "budget": plan.seconds,
    }


def cache_file(spec: ModelSpec, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return spec.cache_dir / "autotune" / f"{spec.name.replace('/', '--')}-{digest}.json"


def _read(path: Path) -> Tuning | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Tuning)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _write(path: Path, tuning: Tuning) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(msgspec.json.encode(tuning))
        os.replace(partial, path)  # whole or absent: a start that reads it never sees half a file
    except OSError as error:  # a read-only cache: tuned again at the next start, served now
        logger.warning("could not cache the autotune result at %s: %s", path, error)


@contextlib.contextmanager
def _one_sweep_at_a_time(folder: Path) -> Iterator[None]:
    """Sweeps on one machine take turns (the models of one repository start together, and so may two servers):
    two at once would each measure the other's load."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / ".lock", "a")  # noqa: SIM115 - held for the block
    except OSError:  # a read-only cache: nothing is written, so there is nothing to take turns on
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def tuned(spec: ModelSpec, sweep: Callable[[ModelSpec, AutotunePlan], Tuning] | None = None,
          ) -> tuple[ModelSpec, Tuning | None]:
    """The spec with what the sweep chose (from the cache when there), and the tuning; unchanged without a plan."""
    plan = spec.autotune
    if plan is None:
        return spec, None
    key = cache_key(spec, plan)
    path = cache_file(spec, key)
    with _one_sweep_at_a_time(spec.cache_dir / "autotune"):
        # Read under the lock: a server that waited for another's sweep of the same model reads its result.
        tuning = _read(path)
        if tuning is not None:
            tuning.cached = True
        else:
            tuning = (sweep or run_sweep)(spec, plan)
            _write(path, tuning)
    logger.info("autotune for %s: %s", spec.name, tuning.describe())
    chosen = replace(spec, max_num_batched_tokens=tuning.max_num_batched_tokens,
                     kv_cache_precision=tuning.kv_cache_precision)
    return chosen, tuning


# ---- the sweep ----------------------------------------------------------------------------------------------

def _sweep_properties(spec: ModelSpec) -> dict[str, Any]:
    properties = spec.properties()
    properties.pop("prompt_lookup", None)  # the model's compute is measured; prompt lookup needs no tuning of its own
    return properties


def run_sweep(spec: ModelSpec, plan: AutotunePlan, clock: Callable[[], float] = time.monotonic,
              build: Callable[[ModelSpec, Candidate], Any] | None = None) -> Tuning:
    from ovgenai_common.cpu import computed_precision

    started = clock()
    deadline = started + plan.seconds
    computes_in = computed_precision(spec.device, spec.properties().get("INFERENCE_PRECISION_HINT"))
    todo = candidates(spec, plan.options, computes_in)
    prompts = _prompts(spec)
    trials: list[Trial] = []
    rejected: list[Candidate] = []
    slowest_build = 0.0
    for candidate in todo:
        if trials and deadline - clock() < trials[0].seconds * 1.5 + slowest_build:
            break  # another build and batch would overrun the budget
        began = clock()
        try:
            pipeline = (build or _build)(spec, candidate)
            _run_batch(pipeline, [prompts[0][:WARM_UP_TOKENS]], candidate, clock, 1)  # first-run costs, untimed
        except RuntimeError as error:
            if not trials:
                raise  # the defaults themselves: serving would fail the same way, and says so
            # A configuration this OpenVINO build or CPU does not support is not a candidate; the model is served.
            logger.warning("autotune: %s skipped, the engine refused it: %s", candidate, str(error).strip()[-300:])
            rejected.append(candidate)
            continue
        slowest_build = max(slowest_build, clock() - began)
        # The default gets half of what is left: a model that cannot compute the batch in it cannot be swept.
        cutoff = clock() + (deadline - clock()) / 2 if not trials else deadline
        trial, complete = _run_batch(pipeline, prompts, candidate, clock, cutoff=cutoff)
        del pipeline
        if not complete:
            if trials:
                break
            # The prompt rate is still measured, on the prompts it did compute.
            note = f"the defaults kept: this model cannot compute the sweep's batch in {plan.seconds:.0f} s here"
            return _tuning(trial, [trial], note, started, clock)
        trials.append(trial)
    chosen, note = choose(trials)
    if rejected:
        note += f" ({len(rejected)} refused by the engine here)"
    if len(trials) + len(rejected) < len(todo):
        note += f" ({len(todo) - len(trials) - len(rejected)} not measured within {plan.seconds:.0f} s)"
    return _tuning(chosen, trials, note, started, clock)


def _tuning(chosen: Trial, trials: list[Trial], note: str, started: float, clock: Callable[[], float]) -> Tuning:
    return Tuning(chosen.max_num_batched_tokens, chosen.kv_cache_precision, chosen.prefill_tokens_per_s, trials,
                  clock() - started, note, cpu_signature()["model"])


def _build(spec: ModelSpec, candidate: Candidate) -> Any:
    import openvino_genai

    from ..contract.weights import loadable_path

    scheduler = openvino_genai.SchedulerConfig()
    # Room for the batch and nothing more: the serving cache is sized later, from the memory then free.
    scheduler.num_kv_blocks = PROMPTS * ((PROMPT_TOKENS + OUTPUT_TOKENS) // KV_BLOCK_TOKENS + 2)
    scheduler.max_num_batched_tokens = candidate.max_num_batched_tokens
    scheduler.max_num_seqs = max(spec.max_num_seqs, PROMPTS)
    scheduler.dynamic_split_fuse = spec.dynamic_split_fuse
    scheduler.enable_prefix_caching = False  # every candidate computes every prompt in full
    properties = _sweep_properties(spec)
    if candidate.kv_cache_precision:
        properties["KV_CACHE_PRECISION"] = candidate.kv_cache_precision
    path = loadable_path(spec.path, spec.enable_quantized_weights, spec.cache_dir, spec.quantized_weights)
    return openvino_genai.ContinuousBatchingPipeline(str(path), scheduler, spec.device, properties)


def _prompts(spec: ModelSpec) -> list[list[int]]:
    """PROMPTS different prompts of PROMPT_TOKENS tokens from the model's own tokenizer (a prompt's cost does not
    depend on its text, but each must be computed in full: no two share a prefix)."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(spec.path), INFERENCE_NUM_THREADS=1)
    text = (" The engine computes each prompt in chunks of the step budget, and decodes every running sequence "
            "once per step, so the budget trades the time to a first token against the pace of the others.")
    ids = tokenizer.encode(text * 40, add_special_tokens=False).input_ids.data[0].tolist()
    return [ids[index * 7:index * 7 + PROMPT_TOKENS] for index in range(PROMPTS)]


def _config(max_new_tokens: int) -> Any:
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.ignore_eos = True
    return config


def _tensor(ids: list[int]) -> Any:
    import numpy as np
    import openvino

    return openvino.Tensor(np.asarray([ids], dtype=np.int64))


def _run_batch(pipeline: Any, prompts: list[list[int]], candidate: Candidate, clock: Callable[[], float],
               max_new_tokens: int = OUTPUT_TOKENS, cutoff: float | None = None) -> tuple[Trial, bool]:
    """Every prompt added at once, as a burst of requests reaches a server; timed to each first token and the end;
    and whether it ended before `cutoff` (past it, the requests are cancelled)."""
    began, complete, steps = clock(), True, 0
    handles = [pipeline.add_request(index + 1, _tensor(prompt), _config(max_new_tokens))
               for index, prompt in enumerate(prompts)]
    first: dict[int, float] = {}
    while pipeline.has_non_finished_requests():
        pipeline.step()
        steps += 1
        now = clock()
        for index, handle in enumerate(handles):
            if handle.can_read():
                first.setdefault(index, now)
                handle.read()
        if cutoff is not None and now > cutoff and pipeline.has_non_finished_requests():
            complete = False
            for handle in handles:
                handle.cancel()
            pipeline.step()  # lets the pipeline drop the cancelled requests
            break
    ended = now if not complete else clock()
    if first:
        rate = sum(len(prompts[index]) for index in first) / max(max(first.values()) - began, 1e-6)
    else:  # cut off before any prompt was through: until then each step computed a full budget of prompt tokens
        computed = min(steps * candidate.max_num_batched_tokens, sum(map(len, prompts)))
        rate = computed / max(ended - began, 1e-6)
    trial = Trial(candidate.max_num_batched_tokens, candidate.kv_cache_precision, ended - began, rate)
    return trial, complete
