"""The engine process: owns one ContinuousBatchingPipeline and steps it.

`ContinuousBatchingPipeline.step()` holds the GIL for the whole step, so the pipeline lives here, away from the
HTTP event loop. The loop blocks on its input socket only when nothing is running; otherwise it drains pending
commands without blocking, steps once, and sends one message carrying every request's new tokens.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import zmq

from ovgenai_common.errors import library_reason
from ovgenai_common.logs import LogFormat, setup_logging

from .grammar import structured_output_config
from .kv_cache import capacity_tokens
from .messages import (
    Abort,
    AddRequest,
    Failed,
    FromEngine,
    Ready,
    RequestStep,
    SeqOutput,
    Shutdown,
    StepOutputs,
    ToEngine,
)
from .prefix_gate import PrefixGate
from .spec import ModelSpec
from .types import PROMPT_LOOKUP_DEFAULTS, GenerationParams, RequestTimings
from .weight_pages import release_model_pages

logger = logging.getLogger("ovgenai_server.engine")

_FINISH = {"STOP": "stop", "LENGTH": "length", "TOOL_CALL": "tool_calls"}
PARENT_CHECK_MS = 1000
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


def engine_seed(seed: int) -> int:
    """A request's 64-bit seed as the engine's generator takes it: openvino_genai's rng_seed holds 64 bits, but its
    sampler's generator keeps the low 32 (seeds 1 and 2**32 + 1 sampled the same text). The high half is folded into
    the low one, so seeds that differ only there differ here too; a seed below 2**32 is the engine's own."""
    return (seed ^ (seed >> 32)) & 0xFFFFFFFF


def build_generation_config(params: GenerationParams, eos_token_ids: list[int]):
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.apply_chat_template = False  # a prompt given as text is already templated by the API process
    config.max_new_tokens = params.max_new_tokens
    if eos_token_ids:
        config.eos_token_id = eos_token_ids[0]
        config.stop_token_ids = set(eos_token_ids)
    config.ignore_eos = params.ignore_eos
    if params.stop:
        config.stop_strings = set(params.stop)
        # Every token comes back, and the API process cuts the text where the stop string begins (stop_text.py):
        # the engine removes whole tokens only, and not always those the string took.
        config.include_stop_str_in_output = True
    config.repetition_penalty = params.repetition_penalty
    config.presence_penalty = params.presence_penalty
    config.frequency_penalty = params.frequency_penalty
    if params.num_beams > 1:
        config.num_beams = params.num_beams
        config.num_beam_groups = 1
        config.num_return_sequences = params.n
    elif params.do_sample:
        config.do_sample = True
        config.temperature = params.temperature
        config.top_p = params.top_p
        config.top_k = params.top_k if params.top_k > 0 else 0
        config.min_p = params.min_p
        config.num_return_sequences = params.n
        # openvino_genai seeds every request's generator with rng_seed, 0 unless set: without a seed of its own,
        # every sampled request would give the same answer (and the n requests of a fanned-out request the same
        # choice). As with OpenAI and vLLM, a request without a seed samples afresh.
        config.rng_seed = engine_seed(params.seed) if params.seed is not None else secrets.randbits(32)
    if params.logprobs:
        config.logprobs = params.logprobs
    if params.echo:
        config.echo = True
    if params.num_assistant_tokens:
        config.num_assistant_tokens = params.num_assistant_tokens
        config.max_ngram_size = params.max_ngram_size
    if params.structured_output is not None:
        config.structured_output_config = structured_output_config(params.structured_output)
    config.validate()
    return config


def loaded_path(spec: ModelSpec) -> Path:
    """The model files the pipeline is built from: the model's, or its weights compressed at load (cached)."""
    from .weights import loadable_path

    return loadable_path(spec.path, spec.enable_quantized_weights, spec.cache_dir, spec.quantized_weights)


def build_pipeline(spec: ModelSpec, path: Path, scheduler: Any = None):
    """The serving pipeline of `spec`, from the model files at `path` (`loaded_path(spec)`)."""
    import openvino_genai

    scheduler = scheduler or spec.scheduler_config(max_context_of(spec))
    return openvino_genai.ContinuousBatchingPipeline(str(path), scheduler, spec.device, spec.properties())


# A pipeline's first inference costs seconds more than any later one (its weights are repacked for the CPU's kernels
# and its buffers allocated): measured 4.7 s at SmolLM2-1.7B int4 on a 2-core AVX-512 EPYC, the first request's time
# to first token 8.3 s against 3.5 s for the next. A few tokens through it before the engine says it is ready move that
# cost from the first user to the start, as llama.cpp's server does with its warm-up run.
WARM_UP_TOKENS = 32
WARM_UP_REQUEST_ID = 2**62  # outside the API process's request ids; finished before the first of them arrives


def warm_up(pipeline, spec: ModelSpec) -> float:
    """One short request through `pipeline`, shaped as the serving loop adds them for this model (text for a
    vision-language model, prompt lookup's parameters where it is on), run to its end; the seconds it took."""
    import numpy as np
    import openvino
    import openvino_genai

    from ovgenai_models.repository import is_vision_model

    started = time.perf_counter()
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 2  # a prompt step and a decode step: the kernels of both are prepared
    config.ignore_eos = True
    if spec.prompt_lookup:  # such a pipeline refuses a request without them
        config.num_assistant_tokens, config.max_ngram_size = PROMPT_LOOKUP_DEFAULTS
    if is_vision_model(spec.folder):  # its pipeline takes text (and images), not token ids
        handle = pipeline.add_request(WARM_UP_REQUEST_ID, " ".join(["warm"] * WARM_UP_TOKENS), [], config)
    else:
        ids = openvino.Tensor(np.arange(100, 100 + WARM_UP_TOKENS, dtype=np.int64).reshape(1, -1))
        handle = pipeline.add_request(WARM_UP_REQUEST_ID, ids, config)
    while pipeline.has_non_finished_requests():
        pipeline.step()
    if handle.can_read():
        handle.read()
    return time.perf_counter() - started


def max_context_of(spec: ModelSpec) -> int:
    """The longest prompt + output the server accepts: the model's own limit, capped by max_tokens_limit (and,
    without split-fuse, by the token budget of one step)."""
    import json

    limit = spec.max_tokens_limit
    if not spec.dynamic_split_fuse:
        # Without split-fuse one step computes a whole prompt, or a whole sequence recomputed after a preemption;
        # the scheduler throws (and so stops the engine) for one longer than the step's token budget. As vLLM
        # without chunked prefill, cap the context at that budget.
        limit = min(limit, spec.max_num_batched_tokens)
    config_file = spec.folder / "config.json"
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
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder(ToEngine)

    def send(message: FromEngine) -> None:
        data = encoder.encode(message)
        while True:
            try:
                outputs.send(data, copy=False)
                return
            except zmq.Again:
                if os.getppid() != parent:
                    raise ParentGone from None

    try:
        from .autotune import tuned

        spec, tuning = tuned(spec)  # a sweep on the model's first start on this CPU; cached after
        path = loaded_path(spec)
        scheduler = spec.scheduler_config(max_context_of(spec))
        pipeline = build_pipeline(spec, path, scheduler)
        # With eviction a sequence holds at most max_cache_size tokens however long it runs: nothing outgrows the cache.
        kv_tokens = None if spec.cache_eviction_config else capacity_tokens(scheduler, path, spec.kv_cache_precision,
                                                                           spec.device)
        logger.info("%s: first inference (warm-up) took %.1f s", spec.name, warm_up(pipeline, spec))
        released = release_model_pages(path)  # the compiled model holds its own copy (weight_pages.py)
        logger.info("%s: %d MB of the model file's mapping released", spec.name, released >> 20)
        eos = sorted(pipeline.get_config().stop_token_ids) or [pipeline.get_tokenizer().get_eos_token_id()]
        send(Ready(max_context=max_context_of(spec), eos_token_ids=eos, tuning=tuning, kv_cache_tokens=kv_tokens))
    except Exception as error:  # start-up failures are reported, then the process exits
        send(Failed(error=f"{type(error).__name__}: {error}"))
        outputs.close(linger=2000)
        return
    logger.info("engine ready: %s", spec.describe())
    from ovgenai_common.cpu import log_computed_precision

    log_computed_precision(spec.name, spec.device, spec.properties())
    try:
        from ovgenai_models.repository import is_vision_model

        gate = PrefixGate() if spec.enable_prefix_caching else None
        EngineLoop(pipeline, eos, commands, send, decoder, parent, gate, is_vision_model(spec.folder)).run()
    except ParentGone:
        pass
    except Exception as error:
        # The trace goes to the log; clients (and /health) get the reason only.
        logger.exception("engine step failed")
        send(Failed(error=library_reason(error)))
        raise
    finally:
        outputs.close(linger=1000)
        commands.close(linger=0)


class EngineLoop:
    """Commands in, one pipeline step, every request's new tokens out, until Shutdown or the parent is gone.

    Each turn: wait for work when idle (`_wait_for_work`), take every pending command (`_apply`), step the pipeline
    once, read each request's new tokens or its end (`_collect`), and send one StepOutputs for all of them
    (`_report`). A request is held back by the prefix gate while another one computes the same prompt prefix.
    """

    def __init__(self, pipeline: Any, eos: list[int], commands: zmq.Socket, send: Callable[[FromEngine], None],
                 decoder: msgspec.msgpack.Decoder, parent: int, gate: PrefixGate | None, vision: bool = False):
        import openvino_genai

        self.pipeline, self.eos, self.commands, self.send = pipeline, eos, commands, send
        # A vision-language model takes each prompt as text and images, so its prompt length is the engine's to say.
        self.vision = vision
        self.decoder, self.parent, self.gate = decoder, parent, gate
        status = openvino_genai.GenerationStatus
        self.running, self.ignored, self.cancel = status.RUNNING, status.IGNORED, status.CANCEL
        self.cancelled = {status.CANCEL, status.STOP}
        self.handles: dict[int, Any] = {}  # openvino_genai GenerationHandle by request id
        self.beams: dict[int, int] = {}  # beam-search requests: how many of the best beams to return
        self.echoes: dict[int, _Echo] = {}  # echo requests: the prompt that comes back ahead of the new tokens
        self.times: dict[int, _Times] = {}  # each request's arrival, admission and first token, for its timings

    def run(self) -> None:
        while True:
            if not self.handles and not self.pipeline.has_non_finished_requests() and not self._wait_for_work():
                return
            pending = self._pending()
            steps: list[RequestStep] = []
            if not self._apply(pending, steps):
                return
            # Cancelled requests leave the pipeline (and free their KV blocks) at the next step, so step even
            # when every handle is gone.
            stepped = self.pipeline.has_non_finished_requests()
            if stepped:
                self.pipeline.step()
            self._collect(steps)
            if stepped and not self.pipeline.has_non_finished_requests():
                # The pipeline releases finished and cancelled requests' KV blocks at its next step, and its
                # metrics describe the last step: without one more (empty) step, an engine going idle would keep
                # reporting the cache as used.
                self.pipeline.step()
            if steps or pending or stepped:
                self._report(steps)

    def _wait_for_work(self) -> bool:
        """Block until a command arrives, waking up now and then to notice a parent that died without telling us;
        False when it has."""
        while not self.commands.poll(PARENT_CHECK_MS):
            if os.getppid() != self.parent:
                return False
        return True

    def _pending(self) -> list[ToEngine]:
        """Every command that has arrived, without blocking."""
        pending = []
        while self.commands.poll(0):
            pending.append(self.decoder.decode(self.commands.recv(copy=False).buffer))
        return pending

    def _apply(self, pending: list[ToEngine], steps: list[RequestStep]) -> bool:
        """Every pending command applied; False on Shutdown (the loop ends)."""
        for command in pending:
            if isinstance(command, AddRequest):
                self.times[command.request_id] = _Times(command.arrival or time.monotonic())
                if self.gate is None or self.gate.admit(command):
                    self._add(command, steps)
            elif isinstance(command, Abort):
                self._abort(command.request_id, steps)
            elif isinstance(command, Shutdown):
                for handle in self.handles.values():
                    handle.cancel()
                if self.pipeline.has_non_finished_requests():
                    self.pipeline.step()  # lets the pipeline release the cancelled requests' KV blocks
                return False
        return True

    def _add(self, command: AddRequest, steps: list[RequestStep]) -> None:
        import numpy as np
        import openvino

        try:
            config = build_generation_config(command.params, self.eos)
            if command.prompt_text:  # a vision-language model: the prompt's text and its images
                images = [openvino.Tensor(np.frombuffer(image.data, np.uint8).reshape(1, image.height, image.width, 3))
                          for image in command.images]
                handle = self.pipeline.add_request(command.request_id, command.prompt_text, images, config)
            else:
                ids = openvino.Tensor(np.asarray([command.prompt_ids], dtype=np.int64))
                handle = self.pipeline.add_request(command.request_id, ids, config)
            self.handles[command.request_id] = handle
            times = self.times.get(command.request_id)
            if times is not None:
                times.admitted = time.monotonic()
            if command.params.num_beams > 1:
                self.beams[command.request_id] = command.params.n
            if command.params.echo:
                self.echoes[command.request_id] = _Echo(len(command.prompt_ids))
        except Exception as error:
            steps.append(RequestStep(command.request_id, [], True, library_reason(error)))
            self.times.pop(command.request_id, None)
            self._prompt_done(command.request_id, False, steps)  # a leader that never ran hands over

    def _abort(self, request_id: int, steps: list[RequestStep]) -> None:
        self.times.pop(request_id, None)
        if self.gate is not None and self.gate.drop(request_id):
            return  # still held: never reached the pipeline
        self.beams.pop(request_id, None)
        self.echoes.pop(request_id, None)
        handle = self.handles.pop(request_id, None)
        if handle is not None:
            handle.cancel()
        self._prompt_done(request_id, False, steps)

    def _prompt_done(self, request_id: int, computed: bool, steps: list[RequestStep]) -> None:
        """A prompt computed (or abandoned): the requests the gate held behind it go in."""
        if self.gate is not None and self.gate.is_leader(request_id):
            for released in self.gate.prompt_done(request_id, computed):
                self._add(released, steps)

    def _collect(self, steps: list[RequestStep]) -> None:
        now = time.monotonic()  # one clock read per step: every request's output of this step came out now
        for request_id, handle in list(self.handles.items()):
            status = handle.get_status()
            if request_id in self.beams:
                if status == self.running:
                    continue  # beams are re-ranked until the end: only the n best are reported, once finished
                seqs = _best_beams(handle, self.beams.pop(request_id))
            else:
                seqs = _new_tokens(handle, self.echoes.get(request_id)) if handle.can_read() else []
            times = self.times.get(request_id)
            if seqs and times is not None and times.first is None:
                times.first = now
            if status == self.running:
                if seqs:
                    steps.append(RequestStep(request_id, seqs, False))
                    self._prompt_done(request_id, True, steps)  # a first token: its prompt is computed (and cached)
                continue
            del self.handles[request_id]
            self.echoes.pop(request_id, None)
            self.times.pop(request_id, None)
            self._prompt_done(request_id, status not in (self.ignored, self.cancel), steps)
            if status == self.ignored:
                message = "The request does not fit into the KV cache; raise cache_size or shorten the prompt."
                steps.append(RequestStep(request_id, seqs, True, message))
            elif status not in self.cancelled:
                steps.append(RequestStep(request_id, seqs, True, timings=times.timings(now) if times else None,
                                         prompt_tokens=_input_tokens(handle) if self.vision else None))

    def _report(self, steps: list[RequestStep]) -> None:
        metrics = self.pipeline.get_metrics()
        running = min(metrics.scheduled_requests, len(self.handles))
        held = self.gate.held if self.gate is not None else 0
        self.send(StepOutputs(steps, running=running, waiting=len(self.handles) - running + held,
                              kv_cache_usage=metrics.cache_usage / 100.0,
                              prefix_waits=self.gate.waits if self.gate is not None else 0))


def _input_tokens(handle: Any) -> int | None:
    """The prompt tokens a finished request had the engine compute: for a vision-language model, the text's and each
    image's (as many as the model's vision encoder made of it). None where the library does not say."""
    try:
        return int(handle.get_perf_metrics().get_num_input_tokens()) or None
    except Exception:  # noqa: BLE001 - the count is a refinement of usage; never fail a finished request over it
        return None


class _Times:
    """When a request reached the engine, entered the pipeline and gave its first token (time.monotonic())."""

    __slots__ = ("arrival", "admitted", "first")

    def __init__(self, arrival: float):
        self.arrival = arrival
        self.admitted: float | None = None
        self.first: float | None = None

    def timings(self, finished: float) -> RequestTimings:
        admitted = self.admitted if self.admitted is not None else finished
        first = self.first if self.first is not None else finished
        return RequestTimings(max(0.0, admitted - self.arrival), max(0.0, first - admitted), max(0.0, finished - first))


class _Echo:
    """The prompt openvino_genai sends back ahead of an echo request's new tokens (in one piece, or one piece per
    scheduled chunk when no token is to be generated), told apart from them per sequence."""

    def __init__(self, prompt_tokens: int):
        self.prompt_tokens = prompt_tokens
        self.seen: dict[int, int] = {}

    def split(self, seq_id: int, ids: list[int], logprobs: list[float]) -> tuple[list[float | None], int]:
        """The prompt's log probabilities at the head of this output, and how many ids they cover."""
        seen = self.seen.get(seq_id, 0)
        count = min(self.prompt_tokens - seen, len(ids))
        self.seen[seq_id] = seen + count
        head: list[float | None] = list(logprobs[:count])
        if seen == 0 and head:
            head[0] = None  # the engine puts a placeholder there: the first token has no context to be scored in
        return head, count


def _new_tokens(handle: Any, echo: _Echo | None = None) -> list[SeqOutput]:
    """Each sequence's tokens generated since the last read, with their log probabilities when asked for."""
    seqs = []
    for seq_id, output in handle.read().items():
        ids, logprobs = list(output.generated_ids), list(output.generated_log_probs)
        prompt_logprobs = None
        if echo is not None:
            prompt_logprobs, count = echo.split(seq_id, ids, logprobs)
            ids, logprobs = ids[count:], logprobs[count:]
        seqs.append(SeqOutput(seq_id, ids, _FINISH.get(output.finish_reason.name), logprobs or None, prompt_logprobs))
    return seqs


def _best_beams(handle: Any, n: int) -> list[SeqOutput]:
    best = sorted(handle.read_all(), key=lambda o: o.score, reverse=True)[:n]
    return [SeqOutput(i, list(o.generated_ids), _FINISH.get(o.finish_reason.name) or "stop", None)
            for i, o in enumerate(best)]
