"""`OpenVINOEngine`: the API-process side of the engine, speaking to the engine process over ZeroMQ.

It tokenizes and applies the chat template here (so prompt lengths are checked before anything is queued),
sends one command per request, and fans each engine step's outputs out to per-request asyncio queues after one
batched detokenization. It watches the engine process: when it dies, every in-flight request gets an error,
health turns 503, and a new engine process is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import zmq
import zmq.asyncio

from ovgenai_common.logs import LogFormat
from ovgenai_common.openvino_threads import prime_tokenizer_outputs
from ovgenai_common.tokens import truncation_limit, vocabulary_size
from ovgenai_models.repository import is_vision_model

from ..images import Image
from ..tool_calls import TOOL_PARSERS, detect_tool_format
from . import process as engine_process
from .autotune import Tuning
from .backlog import PrefillBacklog
from .chat_template import ChatTemplate
from .detokenizer import SequenceText, detokenize_step
from .grammar import GrammarChecker, GrammarError
from .messages import Abort, AddRequest, Failed, FromEngine, Ready, SeqOutput, Shutdown, StepOutputs
from .spec import ModelSpec
from .stop_text import StopText
from .types import (
    EngineError,
    EngineHealth,
    EngineState,
    EngineStats,
    GenerationParams,
    ModelInfo,
    RequestOutput,
    SequenceDelta,
    StructuredOutput,
)

logger = logging.getLogger(__name__)

RESTART_BACKOFF_SECONDS = (0.5, 1, 2, 5, 10)


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


class OpenVINOEngine:
    def __init__(self, spec: ModelSpec, log_level: str = "INFO", grammar_timeout: float = 10.0,
                 log_format: LogFormat = "text"):
        import openvino_genai

        self.spec = spec
        self.name = spec.name
        self.max_context = spec.max_tokens_limit
        self.best_of_limit = spec.best_of_limit
        self.max_num_seqs = spec.max_num_seqs
        self.prompt_lookup = spec.prompt_lookup
        self.prefix_caching = spec.enable_prefix_caching
        self.model = ModelInfo(str(spec.path), spec.folder, spec.device)
        self.stats = EngineStats()
        self._log_level, self._log_format = log_level, log_format
        # One inference thread, left where this process runs (OpenVINO's pinning could put it on an engine core): a
        # prompt's tokens take a fraction of a millisecond either way, and more threads here would interrupt the
        # engine's (engine/placement.py).
        self._tokenizer = openvino_genai.Tokenizer(str(spec.path), INFERENCE_NUM_THREADS=1, ENABLE_CPU_PINNING=False)
        prime_tokenizer_outputs(self._tokenizer)  # before request threads tokenize (ovgenai_common/openvino_threads.py)
        self.template = ChatTemplate.resolve(spec.folder, self._tokenizer)
        self.tool_parser = (
            TOOL_PARSERS[spec.tool_parser] if spec.tool_parser else detect_tool_format(self.template.text)
        )
        self.reasoning_parser = spec.reasoning_parser
        self.vision = is_vision_model(spec.folder)
        self.vocabulary = vocabulary_size(self._tokenizer)
        self.tokenizer_limit = truncation_limit(self._tokenizer, spec.max_tokens_limit)
        if self.tokenizer_limit is not None:
            logger.warning("the tokenizer of %s cuts texts to their last %d tokens: longer prompts are refused; "
                           "prepare the model again (python -m ovgenai_models) to lift the limit",
                           self.name, self.tokenizer_limit)
        self._vocab: dict[int, str] | None = None
        self._state = EngineState.LOADING
        self._message = "Loading model"
        self._requests: dict[int, _Request] = {}
        self.tuning: Tuning | None = None  # from the engine process once ready, when autotune ran
        self.kv_cache_tokens: int | None = None  # from the engine process once ready
        self._backlog = PrefillBacklog(spec.enable_prefix_caching)
        self._ids = itertools.count()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(FromEngine)
        self._ipc_dir = tempfile.TemporaryDirectory(prefix="ovgenai-engine-")
        self._ctx = zmq.asyncio.Context()
        self._sync_ctx = zmq.Context()
        self._process: multiprocessing.process.BaseProcess | None = None
        self._tasks: list[asyncio.Task] = []
        self._closing = False
        self._ever_ready = False
        self._prefix_waits_before = 0
        self.fatal_error: str | None = None
        self.on_fatal: Callable[[OpenVINOEngine], None] | None = None  # when the model cannot be loaded at all
        self._grammar_timeout = grammar_timeout
        self._grammars: GrammarChecker | None = None  # built at the first request with a grammar

    # ---- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        ipc = Path(self._ipc_dir.name)
        self._commands_address = f"ipc://{ipc / 'commands'}"
        self._outputs_address = f"ipc://{ipc / 'outputs'}"
        # Commands go out on a plain socket: a PUSH over ipc never blocks below its high-water mark, and a
        # synchronous send can be made from `finally` blocks of cancelled tasks.
        self._commands = self._sync_ctx.socket(zmq.PUSH)
        self._commands.bind(self._commands_address)
        self._outputs = self._ctx.socket(zmq.PULL)
        self._outputs.bind(self._outputs_address)
        self._tasks.append(asyncio.create_task(self._supervise(), name=f"engine-supervisor-{self.name}"))

    async def close(self) -> None:
        self._closing = True
        if self._process is not None and self._process.is_alive():
            self._send(Shutdown())
            await asyncio.get_running_loop().run_in_executor(None, self._process.join, 10)
            if self._process.is_alive():
                self._process.kill()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._fail_all("The server is shutting down.")
        if self._grammars is not None:
            self._grammars.close()
        self._commands.close(linger=0)
        self._outputs.close(linger=0)
        self._ctx.term()
        self._sync_ctx.term()
        self._ipc_dir.cleanup()

    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    async def _supervise(self) -> None:
        """Start the engine process, serve its outputs, and restart it whenever it dies."""
        failures = 0
        while not self._closing:
            self._state, self._message = EngineState.LOADING, "Loading model"
            process = multiprocessing.get_context("spawn").Process(
                target=engine_process.run_engine,
                args=(self.spec, self._commands_address, self._outputs_address, self._log_level, os.getpid(),
                      self._log_format),
                name=f"ovgenai-engine-{self.name}",
                daemon=True,
            )
            process.start()
            self._process = process
            reader = asyncio.create_task(self._read_outputs())
            died = asyncio.get_running_loop().create_future()
            loop = asyncio.get_running_loop()
            loop.add_reader(process.sentinel, _settle, died)
            try:
                await asyncio.wait([reader, died], return_when=asyncio.FIRST_COMPLETED)
            finally:
                loop.remove_reader(process.sentinel)
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            if self._closing:
                return
            if not self._ever_ready and self._state is EngineState.FAILED:
                # The model never loaded: retrying cannot help (bad model, device or options). Stop the server
                # with the reason instead of reporting 503 forever.
                self.fatal_error = self._message
                logger.critical("cannot load %s: %s", self.name, self._message)
                if self.on_fatal:
                    self.on_fatal(self)
                return
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
            failures = 0 if self._state is EngineState.AVAILABLE else failures + 1
            reason = self._message if self._state is EngineState.FAILED else f"exit code {process.exitcode}"
            logger.error("engine process for %s stopped (%s); restarting", self.name, reason)
            self._state, self._message = EngineState.FAILED, f"Engine process stopped ({reason}); restarting"
            self.stats.restarts += 1
            self._prefix_waits_before = self.stats.prefix_waits
            self._fail_all("The engine process stopped while generating; please retry.", retryable=True)
            await asyncio.sleep(RESTART_BACKOFF_SECONDS[min(failures, len(RESTART_BACKOFF_SECONDS) - 1)])

    async def _read_outputs(self) -> None:
        while True:
            message = self._decoder.decode((await self._outputs.recv(copy=False)).buffer)
            if isinstance(message, StepOutputs):
                self._dispatch(message)
            elif isinstance(message, Ready):
                self.max_context = message.max_context
                self.tuning = message.tuning
                self.kv_cache_tokens = message.kv_cache_tokens
                self._state, self._message = EngineState.AVAILABLE, ""
                self._ever_ready = True
                logger.info("engine for %s is ready (pid %s)", self.name, self.pid())
            elif isinstance(message, Failed):
                self._state, self._message = EngineState.FAILED, message.error.strip().splitlines()[-1]
                logger.error("engine for %s failed: %s", self.name, message.error)
                return

    # ---- hot path ----------------------------------------------------------------------------------------

    def _dispatch(self, message: StepOutputs) -> None:
        self.stats.running, self.stats.waiting = message.running, message.waiting
        self.stats.kv_cache_usage = message.kv_cache_usage
        self.stats.prefix_waits = self._prefix_waits_before + message.prefix_waits
        work: list[tuple[RequestOutput, int, SequenceText, list[int], bool, SeqOutput, StopText | None]] = []
        for step in message.requests:
            request = self._requests.get(step.request_id)
            if request is None:  # aborted meanwhile
                continue
            if step.error is not None:
                request.done = True
                request.queue.put_nowait(EngineError(step.error))
                continue
            if request.backlog:  # its prompt is computed
                self._backlog.done(request.backlog)
                request.backlog = 0
            output = RequestOutput([], step.finished, step.prompt_tokens or request.prompt_tokens, step.timings)
            request.done = step.finished
            request.queue.put_nowait(output)
            for seq in step.seqs:
                index = request.seq_index.setdefault(seq.seq_id, len(request.seq_index))
                text = request.texts.setdefault(index, SequenceText())
                final = seq.finish_reason is not None or step.finished
                stop_text = request.stop_texts.setdefault(index, StopText(request.stops)) if request.stops else None
                work.append((output, index, text, seq.token_ids, final, seq, stop_text))
        if not work:
            return
        texts = detokenize_step(self._tokenizer.decode, [(t, ids, final) for _, _, t, ids, final, _, _ in work])
        for (output, index, _text, ids, final, seq, stop_text), delta in zip(work, texts, strict=True):
            if stop_text is not None:
                delta = stop_text.feed(delta, final)
            output.deltas.append(
                SequenceDelta(index, delta, len(ids), seq.finish_reason, seq.logprobs, ids, seq.prompt_logprobs)
            )

    def _fail_all(self, message: str, retryable: bool = False) -> None:
        for request in self._requests.values():
            if not request.done:
                request.done = True
                request.queue.put_nowait(EngineError(message, retryable=retryable))

    # ---- Engine interface --------------------------------------------------------------------------------

    def health(self) -> EngineHealth:
        return EngineHealth(self._state, self._message)

    def in_flight(self) -> int:
        return len(self._requests)

    def queue_wait(self, prompts: Sequence[Sequence[int]]) -> float | None:
        if self.tuning is None or self.tuning.prefill_tokens_per_s <= 0:
            return None
        return self._backlog.wait_seconds(prompts, self.tuning.prefill_tokens_per_s)

    def apply_chat_template(
        self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True,
        extra_context: dict[str, Any] | None = None,
    ) -> str:
        return self.template.render(self._tokenizer, messages, tools, add_generation_prompt, extra_context)

    def supports_tools(self) -> bool:
        return self.template.supports_tools

    async def check_structured_output(self, structured: StructuredOutput) -> str | None:
        if self._grammars is None:
            self._grammars = await asyncio.to_thread(
                GrammarChecker, self._tokenizer, self.vocabulary or len(self._tokenizer.get_vocab_vector()),
                self._grammar_timeout,
            )
        try:
            await self._grammars.check(structured)
        except GrammarError as error:
            return str(error)
        return None

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).input_ids.data[0].tolist()

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tokenizer.decode(token_ids, skip_special_tokens=skip_special_tokens)

    def token_strings(self, token_ids: list[int]) -> list[str]:
        if self._vocab is None:  # built once, at the first request that asks: ~50k entries
            # get_vocab() gives each token's bytes (get_vocab_vector() fails on byte-level pieces that are not
            # UTF-8 on their own); such a piece is shown with U+FFFD where its bytes do not decode.
            self._vocab = {i: b.decode("utf-8", "replace") for b, i in self._tokenizer.get_vocab().items()}
        return [self._vocab.get(t, "") for t in token_ids]

    async def generate(
        self, prompt_ids: list[int], params: GenerationParams, prompt_text: str = "", images: Sequence[Image] = ()
    ) -> AsyncGenerator[RequestOutput, None]:
        if params.n > 1 and params.num_beams <= 1:
            # n sampled choices are n requests of one sequence (their prompt computed once, through the prefix cache
            # and prefix-aware admission): openvino_genai's prompt lookup decodes one sequence per request, and its
            # scheduler crashes the engine process when it preempts groups of several sampled sequences (measured
            # with 2026.4: four requests of n=4 in a small KV cache, a segmentation fault within a few rounds; as
            # requests of one sequence, none in 40).
            async with contextlib.aclosing(_fan_out(self, prompt_ids, params, prompt_text, images)) as outputs:
                async for output in outputs:
                    yield output
            return
        if self._state is not EngineState.AVAILABLE:
            raise EngineError(f"Model '{self.name}' is not available: {self._message}", retryable=True)
        request_id = next(self._ids)
        request = _Request(asyncio.Queue(), len(prompt_ids), self._backlog.add(prompt_ids), stops=params.stop)
        self._requests[request_id] = request
        try:
            vision = (prompt_text, list(images)) if self.vision else ("", [])
            self._send(AddRequest(request_id, prompt_ids, params, time.monotonic(), *vision))
            while True:
                item = await request.queue.get()
                # Merge whatever else is already queued: a slow client gets fewer, larger chunks.
                while not request.queue.empty() and not isinstance(item, EngineError):
                    nxt = request.queue.get_nowait()
                    if isinstance(nxt, EngineError):
                        item = nxt
                        break
                    item = _merge(item, nxt)
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

    def _send(self, command: AddRequest | Abort | Shutdown) -> None:
        self._commands.send(self._encoder.encode(command), flags=zmq.NOBLOCK)


async def _fan_out(engine: OpenVINOEngine, prompt_ids: list[int], params: GenerationParams, prompt_text: str = "",
                   images: Sequence[Image] = ()) -> AsyncGenerator[RequestOutput, None]:
    """`params.n` one-sequence requests as one: their outputs merged, each request's sequence as choice i (seeded
    seed + i when the request has a seed, so that it reproduces)."""
    queue: asyncio.Queue[tuple[int, RequestOutput | BaseException | None]] = asyncio.Queue()

    async def run(index: int) -> None:
        seed = None if params.seed is None else (params.seed + index) % 2**64
        one = msgspec.structs.replace(params, n=1, seed=seed)
        try:
            async with contextlib.aclosing(engine.generate(prompt_ids, one, prompt_text, images)) as outputs:
                async for output in outputs:
                    await queue.put((index, output))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put((index, error))
        finally:
            await queue.put((index, None))

    tasks = [asyncio.create_task(run(index)) for index in range(params.n)]
    running, timings, prompt_tokens = params.n, None, len(prompt_ids)
    try:
        while running:
            index, item = await queue.get()
            if item is None:
                running -= 1
                continue
            if isinstance(item, BaseException):
                raise item
            for delta in item.deltas:
                delta.index = index
            timings = item.timings or timings  # the phases of the choice that finished last
            if item.finished:  # a finished choice carries the engine's count (engine/process.py)
                prompt_tokens = item.prompt_tokens
            yield RequestOutput(item.deltas, finished=False, prompt_tokens=prompt_tokens)
        yield RequestOutput([], finished=True, prompt_tokens=prompt_tokens, timings=timings)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _merge(first: RequestOutput, second: RequestOutput) -> RequestOutput:
    by_index = {d.index: d for d in first.deltas}
    for delta in second.deltas:
        prior = by_index.get(delta.index)
        if prior is None:
            first.deltas.append(delta)
            by_index[delta.index] = delta
            continue
        prior.text += delta.text
        prior.token_count += delta.token_count
        prior.finish_reason = delta.finish_reason or prior.finish_reason
        if delta.logprobs:
            prior.logprobs = (prior.logprobs or []) + delta.logprobs
        if delta.token_ids:
            prior.token_ids = (prior.token_ids or []) + delta.token_ids
        if delta.prompt_logprobs:
            prior.prompt_logprobs = (prior.prompt_logprobs or []) + delta.prompt_logprobs
    first.finished = first.finished or second.finished
    first.timings = first.timings or second.timings
    first.prompt_tokens = second.prompt_tokens  # the later count: the engine's, on a request's last output
    return first


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
