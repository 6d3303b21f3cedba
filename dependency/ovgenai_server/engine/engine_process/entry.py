"""The engine process: owns one ContinuousBatchingPipeline and steps it.

`ContinuousBatchingPipeline.step()` holds the GIL for the whole step, so the pipeline lives here, away from the
HTTP event loop. The loop blocks on its input socket only when nothing is running; otherwise it drains pending
commands without blocking, steps once, and sends one message carrying every request's new tokens.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import zmq

from ovgenai_common.errors import library_reason
from ovgenai_common.logs import LogFormat, setup_logging

from ..contract.kv_cache import capacity_tokens
from ..contract.messages import Failed, FromEngine, Ready, ToEngine
from ..contract.spec import ModelSpec
from ..contract.types import PROMPT_LOOKUP_DEFAULTS
from .grammar_worker import GrammarWorker, logits_size
from .loop import PARENT_CHECK_MS, EngineLoop
from .prefix_gate import PrefixGate
from .weight_pages import release_model_pages

logger = logging.getLogger("ovgenai_server.engine")

_PR_SET_PDEATHSIG = 1


class ParentGone(Exception):
    """The API process died without telling us (e.g. SIGKILL): nobody reads our outputs any more."""


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when the API process dies, however it dies. Without it, an engine whose
    parent was SIGKILLed mid-generation keeps stepping until its output queue fills, then blocks forever."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the polling checks below still notice, a little later
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(0)


def loaded_path(spec: ModelSpec) -> Path:
    """The model files the pipeline is built from: the model's, or its weights compressed at load (cached)."""
    from ..contract.weights import loadable_path

    return loadable_path(spec.path, spec.enable_quantized_weights, spec.cache_dir, spec.quantized_weights)


def build_pipeline(spec: ModelSpec, path: Path, scheduler: Any = None):
    """The serving pipeline of `spec`, from the model files at `path` (`loaded_path(spec)`)."""
    import openvino_genai

    scheduler = scheduler or spec.scheduler_config()
    return openvino_genai.ContinuousBatchingPipeline(str(path), scheduler, spec.device, spec.pipeline_properties())


# A pipeline's first inference costs seconds more than any later one (its weights are repacked for the CPU's kernels
# and its buffers allocated): a few tokens through it before the engine says it is ready move that cost from the
# first user to the start, as llama.cpp's server does with its warm-up run (bench/results.md).
WARM_UP_TOKENS = 32
WARM_UP_REQUEST_ID = 2**62  # outside the API process's request ids; finished before the first of them arrives


def warm_up(pipeline, spec: ModelSpec) -> float:
    """One short request through `pipeline`, shaped as the serving loop adds them for this model (text for a
    vision-language model, prompt lookup's parameters where it is on), run to its end; the seconds it took."""
    import numpy as np
    import openvino
    import openvino_genai

    started = time.perf_counter()
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 2  # a prompt step and a decode step: the kernels of both are prepared
    config.ignore_eos = True
    if spec.prompt_lookup:  # such a pipeline refuses a request without them
        config.num_assistant_tokens, config.max_ngram_size = PROMPT_LOOKUP_DEFAULTS
    elif spec.draft_model is not None:  # as with a draft model
        config.num_assistant_tokens = spec.num_speculative_tokens
    if spec.vision:  # its pipeline takes text (and images), not token ids
        handle = pipeline.add_request(WARM_UP_REQUEST_ID, " ".join(["warm"] * WARM_UP_TOKENS), [], config)
    else:
        ids = openvino.Tensor(np.arange(100, 100 + WARM_UP_TOKENS, dtype=np.int64).reshape(1, -1))
        handle = pipeline.add_request(WARM_UP_REQUEST_ID, ids, config)
    while pipeline.has_non_finished_requests():
        pipeline.step()
    if handle.can_read():
        handle.read()
    return time.perf_counter() - started


def run_engine(
    spec: ModelSpec, commands_address: str, outputs_address: str, log_level: str = "INFO", parent: int | None = None,
    log_format: LogFormat = "text",
) -> None:
    # The API process owns shutdown (it drains, then sends Shutdown); a Ctrl-C or SIGTERM that reaches the
    # whole process group must not kill the engine under requests that are still draining.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = parent or os.getppid()
    die_with_parent(parent)
    if spec.engine_cores:  # before OpenVINO starts its threads: they inherit it, and it reads its cores from it
        os.sched_setaffinity(0, spec.engine_cores)
    setup_logging(log_level, log_format)
    context = zmq.Context()
    commands = context.socket(zmq.PULL)
    commands.connect(commands_address)
    outputs = context.socket(zmq.PUSH)
    # A send that cannot be queued (the API process stopped reading) wakes up to check that it is still there.
    outputs.setsockopt(zmq.SNDTIMEO, PARENT_CHECK_MS)
    outputs.connect(outputs_address)
    send = _sender(outputs, parent)
    try:
        pipeline, eos, spec = _load(spec, send)
    except Exception as error:  # start-up failures are reported, then the process exits
        send(Failed(error=f"{type(error).__name__}: {error}"))
        outputs.close(linger=2000)
        return
    grammars = None
    try:
        gate = PrefixGate() if spec.enable_prefix_caching else None
        tokenizer = pipeline.get_tokenizer()  # the grammars' compile cache is the one this tokenizer keeps
        grammars = GrammarWorker(tokenizer, logits_size(spec, tokenizer), send, spec.grammar_compile_timeout,
                            spec.grammar_cache_size)
        EngineLoop(pipeline, eos, commands, send, msgspec.msgpack.Decoder(ToEngine), parent, gate, grammars).run()
    except ParentGone:
        pass
    except Exception as error:
        # The trace goes to the log; clients (and /health) get the reason only.
        logger.exception("engine step failed")
        send(Failed(error=library_reason(error)))
        raise
    finally:
        if grammars is not None:
            grammars.close()
        outputs.close(linger=1000)
        commands.close(linger=0)


def _sender(outputs: zmq.Socket, parent: int) -> Callable[[FromEngine], None]:
    """Sends a message to the API process, waiting while its queue is full for as long as that process lives."""
    encoder = msgspec.msgpack.Encoder()

    def send(message: FromEngine) -> None:
        data = encoder.encode(message)
        while True:
            try:
                outputs.send(data, copy=False)
                return
            except zmq.Again:
                if os.getppid() != parent:
                    raise ParentGone from None

    return send


def _load(spec: ModelSpec, send: Callable[[FromEngine], None]) -> tuple[Any, list[int], ModelSpec]:
    """The serving pipeline built (tuned on the model's first start on this CPU), warmed up and announced Ready."""
    from ovgenai_common.cpu import log_computed_precision

    from .autotune import tuned

    spec, tuning = tuned(spec)  # a sweep on the model's first start on this CPU; cached after
    path = loaded_path(spec)
    scheduler = spec.scheduler_config()
    pipeline = build_pipeline(spec, path, scheduler)
    # With eviction a sequence holds at most max_cache_size tokens however long it runs: nothing outgrows the cache.
    kv_tokens = None if spec.cache_eviction_config else capacity_tokens(scheduler, path, spec.kv_cache_precision,
                                                                       spec.device)
    logger.info("%s: first inference (warm-up) took %.1f s", spec.name, warm_up(pipeline, spec))
    released = release_model_pages(path)  # the compiled model holds its own copy (weight_pages.py)
    logger.info("%s: %d MB of the model file's mapping released", spec.name, released >> 20)
    eos = sorted(pipeline.get_config().stop_token_ids) or [pipeline.get_tokenizer().get_eos_token_id()]
    send(Ready(eos_token_ids=eos, tuning=tuning, kv_cache_tokens=kv_tokens))
    logger.info("engine ready: %s", spec.describe())
    log_computed_precision(spec.name, spec.device, spec.properties())
    return pipeline, eos, spec
