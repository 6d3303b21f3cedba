"""`OpenVINORuntime`: the API-process side of the engine, speaking to the engine process over ZeroMQ.

It sends one command per request and fans each engine step's outputs out to per-request asyncio queues after one
batched detokenization. The engine process is kept alive by its supervisor (supervisor.py): when it dies, every
in-flight request gets an error, health turns 503, and a new engine process is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import tempfile
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import zmq
import zmq.asyncio

from ovgenai_common.logs import LogFormat

from ..contract.messages import (
    Abort,
    AddGroup,
    AddRequest,
    Failed,
    FromEngine,
    GrammarBusy,
    GrammarStarted,
    GrammarVerdict,
    Ready,
    SeqOutput,
    Shutdown,
    StepOutputs,
    ToEngine,
)
from ..contract.spec import ModelSpec
from ..contract.tuning import Tuning
from ..contract.types import (
    EngineError,
    EngineHealth,
    EngineState,
    EngineStats,
    GenerationParams,
    Prompt,
    RequestOutput,
    RequestTimings,
    SequenceDelta,
    StructuredOutput,
    engine_ends_at_stops,
)
from .backlog import PrefillBacklog
from .detokenizer import SequenceText, detokenize_step
from .fan_out import choices, fan_out, merge
from .grammar_checks import GrammarChecks
from .stop_text import StopText
from .supervisor import EngineSupervisor

logger = logging.getLogger(__name__)


@dataclass
class _Request:
    queue: asyncio.Queue
    prompt_tokens: int
    backlog: int = 0  # its prompt tokens still counted in the prefill backlog, until its first output
    seq_index: dict[int, int] = field(default_factory=dict)
    texts: dict[int, SequenceText] = field(default_factory=dict)
    done: bool = False
    stops: tuple[str, ...] = ()  # the request's stop strings: each sequence's text is cut where one begins
    stop_texts: dict[int, StopText] = field(default_factory=dict)
    ends_at_stop: bool = False  # the engine is not told its stop strings: a stop string found here ends it
    min_tokens: int = 0  # no stop string counts before a sequence has this many tokens
    stopped: bool = False  # so it ended: it is over, whatever the engine still sends
    first: tuple[RequestTimings, float] | None = None  # the engine's times at its first output, and when it came

    def timings(self) -> RequestTimings | None:
        """Its engine times if it ended now (at a stop string: the engine did not end it)."""
        if self.first is None:
            return None
        times, seen = self.first
        return RequestTimings(times.queue, times.prefill, time.monotonic() - seen)


class OpenVINORuntime:
    def __init__(self, spec: ModelSpec, tokenizer: Any, log_level: str = "INFO", log_format: LogFormat = "text"):
        self.spec = spec
        self.name = spec.name
        self.stats = EngineStats()
        self.tuning: Tuning | None = None  # from the engine process once ready, when autotune ran
        self.kv_cache_tokens: int | None = None  # from the engine process once ready
        # the prompt builder's (engine/api_process/prompt_builder.py): deltas are decoded with it
        self._tokenizer = tokenizer
        self._requests: dict[int, _Request] = {}
        self._backlog = PrefillBacklog(spec.enable_prefix_caching)
        self._ids = itertools.count()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(FromEngine)
        self._ipc_dir = tempfile.TemporaryDirectory(prefix="ovgenai-engine-")
        self._commands_address = f"ipc://{Path(self._ipc_dir.name) / 'commands'}"
        self._outputs_address = f"ipc://{Path(self._ipc_dir.name) / 'outputs'}"
        self._ctx = zmq.asyncio.Context()
        self._sync_ctx = zmq.Context()
        # Commands go out on a plain socket: a PUSH over ipc never blocks below its high-water mark, and a
        # synchronous send can be made from `finally` blocks of cancelled tasks.
        self._commands = self._sync_ctx.socket(zmq.PUSH)
        self._outputs = self._ctx.socket(zmq.PULL)
        self._closing = False
        self._prefix_waits_before = 0
        self._grammar_checks = GrammarChecks(self._send, spec.grammar_compile_timeout)
        self.supervisor = EngineSupervisor(spec, (self._commands_address, self._outputs_address), log_level,
                                           log_format, self._read_outputs, self._engine_stopped)

    # ---- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._commands.bind(self._commands_address)
        self._outputs.bind(self._outputs_address)
        self.supervisor.start()

    async def close(self) -> None:
        self._closing = True
        await self.supervisor.close(lambda: self._send(Shutdown()))
        self._fail_all("The server is shutting down.")
        self._commands.close(linger=0)
        self._outputs.close(linger=0)
        self._ctx.term()
        self._sync_ctx.term()
        self._ipc_dir.cleanup()

    def pid(self) -> int | None:
        return self.supervisor.pid()

    def _engine_stopped(self, _reason: str) -> None:
        """The engine process stopped unasked: its requests are told to retry, its counts carried over."""
        self.stats.restarts += 1
        self._prefix_waits_before = self.stats.prefix_waits
        self._fail_all("The engine process stopped while generating; please retry.", retryable=True)

    async def _read_outputs(self) -> None:
        while True:
            message = self._decoder.decode((await self._outputs.recv(copy=False)).buffer)
            if isinstance(message, StepOutputs):
                self._dispatch(message)
            elif isinstance(message, GrammarStarted | GrammarVerdict | GrammarBusy):
                self._grammar_checks.answered(message)
            elif isinstance(message, Ready):
                self.tuning = message.tuning
                self.kv_cache_tokens = message.kv_cache_tokens
                self.supervisor.ready()
                logger.info("engine for %s is ready (pid %s)", self.name, self.pid())
            elif isinstance(message, Failed):
                self.supervisor.failed(message.error.strip().splitlines()[-1])
                logger.error("engine for %s failed: %s", self.name, message.error)
                return

    # ---- hot path ----------------------------------------------------------------------------------------

    def _dispatch(self, message: StepOutputs) -> None:
        self.stats.running, self.stats.waiting = message.running, message.waiting
        self.stats.kv_cache_usage = message.kv_cache_usage
        self.stats.prefix_waits = self._prefix_waits_before + message.prefix_waits
        work: list[tuple[_Request, RequestOutput, int, SequenceText, list[int], bool, SeqOutput]] = []
        for step in message.requests:
            request = self._requests.get(step.request_id)
            if request is None or request.stopped:  # aborted meanwhile, or ended at a stop string and being aborted
                continue
            if step.error is not None:
                request.done = True
                request.queue.put_nowait(EngineError(step.error))
                continue
            if request.backlog:  # its prompt is computed
                self._backlog.done(request.backlog)
                request.backlog = 0
            if not step.finished and step.timings is not None:  # its first output
                request.first = (step.timings, time.monotonic())
            output = RequestOutput([], step.finished, step.prompt_tokens or request.prompt_tokens,
                                   step.timings if step.finished else None)
            request.done = step.finished
            request.queue.put_nowait(output)
            for seq in step.seqs:
                index = request.seq_index.setdefault(seq.seq_id, len(request.seq_index))
                text = request.texts.setdefault(index, SequenceText())
                final = seq.finish_reason is not None or step.finished
                work.append((request, output, index, text, seq.token_ids, final, seq))
        if not work:
            return
        texts = detokenize_step(self._tokenizer.decode, [(t, ids, final) for _, _, _, t, ids, final, _ in work])
        for (request, output, index, text, ids, final, seq), delta in zip(work, texts, strict=True):
            matched, finish = None, seq.finish_reason  # matched: said once, with the text that ended at it
            if request.stops:
                stop_text = request.stop_texts.setdefault(index, StopText(request.stops))
                running = not stop_text.stopped
                delta = stop_text.feed(delta, final, armed=len(text.ids) >= request.min_tokens)
                if running and stop_text.stopped:
                    matched = stop_text.matched
                    if request.ends_at_stop:  # here, as vLLM ends it; leaving it aborts it in the engine (_results)
                        finish = "stop"
                        if not final:
                            output.finished = request.stopped = True
                            output.timings = request.timings()
            output.deltas.append(SequenceDelta(index, delta, len(ids), finish, seq.logprobs, ids,
                                               seq.prompt_logprobs, matched))

    def _fail_all(self, message: str, retryable: bool = False) -> None:
        self._grammar_checks.fail_all(message)
        for request in self._requests.values():
            if not request.done:
                request.done = True
                request.queue.put_nowait(EngineError(message, retryable=retryable))

    # ---- Runtime interface (engine/contract/interface.py) ------------------------------------------------------------

    def health(self) -> EngineHealth:
        return self.supervisor.health()

    def in_flight(self) -> int:
        return len(self._requests)

    def queue_wait(self, prompts: Sequence[Sequence[int]]) -> float | None:
        if self.tuning is None or self.tuning.prefill_tokens_per_s <= 0:
            return None
        return self._backlog.wait_seconds(prompts, self.tuning.prefill_tokens_per_s)

    def grammar_checks(self) -> int:
        return self._grammar_checks.pending()

    async def check_structured_output(self, structured: StructuredOutput) -> str | None:
        if self.supervisor.state is not EngineState.AVAILABLE:
            raise EngineError(f"Model '{self.name}' is not available: {self.supervisor.message}", retryable=True)
        return await self._grammar_checks.check(structured)

    async def generate(self, prompt: Prompt, params: GenerationParams) -> AsyncGenerator[RequestOutput, None]:
        if self.supervisor.state is not EngineState.AVAILABLE:
            raise EngineError(f"Model '{self.name}' is not available: {self.supervisor.message}", retryable=True)
        if params.n > 1 and params.num_beams <= 1:
            # n sampled choices are n requests of one sequence (their prompt computed once, through the prefix cache
            # and prefix-aware admission): openvino_genai's prompt lookup decodes one sequence per request, and its
            # scheduler crashes the engine process when it preempts groups of several sampled sequences. They go in
            # one message, so the engine adds them in one step whatever the load: a seeded request reproduces.
            adds = [self._open(prompt, one) for one in choices(params)]
            self._send_adding(AddGroup(adds), adds)
            streams = [self._results(add.request_id) for add in adds]
            async with contextlib.aclosing(fan_out(streams, len(prompt.token_ids))) as outputs:
                async for output in outputs:
                    yield output
            return
        add = self._open(prompt, params)
        self._send_adding(add, [add])
        async with contextlib.aclosing(self._results(add.request_id)) as outputs:
            async for output in outputs:
                yield output

    def _open(self, prompt: Prompt, params: GenerationParams) -> AddRequest:
        """A request registered to receive its outputs; the command that adds it to the engine, to send."""
        request_id = next(self._ids)
        self._requests[request_id] = _Request(asyncio.Queue(), len(prompt.token_ids),
                                              self._backlog.add(prompt.token_ids), stops=params.stop,
                                              ends_at_stop=not engine_ends_at_stops(params, prompt),
                                              min_tokens=params.min_new_tokens)
        return AddRequest(request_id, prompt, params, time.monotonic())

    def _send_adding(self, command: AddRequest | AddGroup, adds: list[AddRequest]) -> None:
        try:
            self._send(command)
        except BaseException:  # not sent: the requests registered for it are forgotten
            for add in adds:
                request = self._requests.pop(add.request_id)
                self._backlog.done(request.backlog)
            raise

    async def _results(self, request_id: int) -> AsyncGenerator[RequestOutput, None]:
        """A registered request's outputs until it finishes; aborted in the engine if it is left before."""
        request = self._requests[request_id]
        try:
            while True:
                item = await _next_output(request.queue)
                if isinstance(item, EngineError):
                    raise item
                yield item
                if item.finished:
                    return
        finally:
            self._requests.pop(request_id, None)
            self._backlog.done(request.backlog)
            request.backlog = 0
            if not request.done and not self._closing:
                # Disconnect or error upstream of us: free the KV cache at the next step.
                with contextlib.suppress(zmq.ZMQError):
                    self._send(Abort(request_id))

    def _send(self, command: ToEngine) -> None:
        self._commands.send(self._encoder.encode(command), flags=zmq.NOBLOCK)


async def _next_output(queue: asyncio.Queue) -> RequestOutput | EngineError:
    """The next output, merged with whatever else is already queued: a slow client gets fewer, larger chunks."""
    item = await queue.get()
    while not queue.empty() and not isinstance(item, EngineError):
        nxt = queue.get_nowait()
        if isinstance(nxt, EngineError):
            return nxt
        item = merge(item, nxt)
    return item

