"""The model's work in a process of its own, so that it never holds the service's event loop.

openvino_genai's tokenizer binding holds the GIL while a call waits for another thread's call on it: four 4 MB bodies
tokenized at once on worker threads stopped the event loop (and /live) for 0.27-0.58 s (bench/results.md). The
backend runs its engine in a process for the same reason. Here a spawned process holds the tokenizer, the embedder
and the reranker (model.py); the API process keeps the event loop, the JSON and the batch queue (batcher.py), and
loads no OpenVINO.

The model process takes calls in two lanes of one thread each: the model's (a batch, counted and embedded in one
call from one encoding; a rerank) and the tokenizer's (decoding token ids, in slices of at most SLICE_TOKEN_IDS), so
that a large request's ids are decoded while batches are embedded. A huge text is tokenized in the model's lane with
its batch (batcher.py cuts batches so that a query waits for one of them), never on the API process's loop.

Calls and answers cross pipes as length-prefixed pickles (`frame`): each lane reads its own calls' pipe, so that a
call wakes the thread that runs it and no other (a reader thread handing calls on added ~0.09 ms to a call that
does no work: bench/results.md), and both lanes write to one answers' pipe. In the API process the pipes are the
event loop's non-blocking transports: a call is written at once (or buffered while the pipe is full, never stalling
the loop) and an answer settles its call's future where it is read, with no thread between; vectors come back as
one float32 array. The model process exits when its calls' pipes close, once each lane has run the calls it was
sent; the API process's exit closes them however it happens. If the model process dies, the calls it held fail
(ModelProcessStopped: a 503, retryable) and it is started again in the precision it chose, not timed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, cast

from ovgenai_common.logs import LogFormat, setup_logging

from .model import ModelConfig, ModelFacts, Models

logger = logging.getLogger(__name__)

SLICE_TOKEN_IDS = 64 * 1024
RESTART_DELAYS = (1.0, 2.0, 5.0, 10.0)  # seconds before each attempt to start a stopped model process again
LANES = ("tokenizer", "model")
TOKENIZER_CALLS = frozenset({"decode"})  # the other calls take the model's lane
READY = 0  # the id of the model process's first answer: its facts, or why it could not load
HEADER = struct.Struct("<Q")  # a frame's length, before its pickled message


class ModelProcessStopped(Exception):
    """The model process is not running (it stopped, or is starting again): the call may be retried."""


class ModelError(Exception):
    """A call failed in the model process; `kind` names what it raised there."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def slices(items: Sequence, limit: int, size: Callable[[Any], int] = len) -> list[list]:
    """`items` in order, cut into runs whose sizes add up to at most `limit` (an item larger than that alone)."""
    runs: list[list] = []
    total = limit + 1
    for item in items:
        if total + size(item) > limit:
            runs.append([])
            total = 0
        runs[-1].append(item)
        total += size(item)
    return runs


# ---- frames: how a call or an answer crosses a pipe -------------------------------------------------------------

def frame(message: Any) -> bytes:
    """`message` pickled, after its length."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def read_frame(reader: BinaryIO) -> Any:
    """The next message from a blocking reader; EOFError at the end of the pipe."""
    header = reader.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    (size,) = HEADER.unpack(header)
    payload = reader.read(size)
    if len(payload) < size:
        raise EOFError
    return pickle.loads(payload)


class Frames:
    """Messages out of the bytes a pipe gives, in whatever pieces it gives them."""

    def __init__(self):
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        messages, start = [], 0
        with memoryview(self._buffer) as view:  # released before the buffer is cut
            while len(view) - start >= HEADER.size:
                (size,) = HEADER.unpack_from(view, start)
                if len(view) - start - HEADER.size < size:
                    break
                start += HEADER.size
                messages.append(pickle.loads(view[start:start + size]))
                start += size
        del self._buffer[:start]
        return messages


# ---- the model process ------------------------------------------------------------------------------------------

def lane_of(method: str) -> str:
    return "tokenizer" if method in TOKENIZER_CALLS else "model"


def serve(config: ModelConfig, calls: dict[str, Any], answers: Any, log_level: str, log_format: LogFormat) -> None:
    """The model process: load, say so (or why not), then run each lane's calls until its pipe in `calls` closes."""
    # The API process owns shutdown: a SIGTERM or Ctrl-C sent to the whole process group must not stop the model
    # under the requests it drains. It closes `calls` when it is done.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    setup_logging(log_level, log_format)
    lock = threading.Lock()

    def answer(call_id: int, ok: bool, value: Any) -> None:
        message = frame((call_id, ok, value))
        with lock, contextlib.suppress(OSError):  # the API process has gone: `calls` is closing too
            _write_all(answers.fileno(), message)

    try:
        models = Models(config)
    except Exception as error:  # reported, then the process ends
        answer(READY, False, (type(error).__name__, str(error)))
        return
    answer(READY, True, models.facts)
    lanes = [threading.Thread(target=_run_lane, args=(models, calls[name], answer), name=name) for name in LANES]
    for lane in lanes:
        lane.start()
    for lane in lanes:
        lane.join()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _run_lane(models: Models, calls: Any, answer: Callable[[int, bool, Any], None]) -> None:
    """Run the calls read from `calls` (a pipe's reading end), one after another, until it closes."""
    with open(calls.fileno(), "rb", closefd=False) as reader:
        while True:
            try:
                call_id, method, args = read_frame(reader)
            except (EOFError, OSError):
                return
            try:
                value = getattr(models, method)(*args)
            except Exception as error:
                answer(call_id, False, (type(error).__name__, str(error)))
            else:
                answer(call_id, True, value)


# ---- the API process's side ---------------------------------------------------------------------------------------

class _Channel(asyncio.Protocol):
    """One model process's calls in flight, written and answered on the event loop: its pipes are the loop's
    non-blocking transports (a call is written at once, or buffered by the transport while the pipe is full), and
    each answer settles its call's future where it is read, with no thread in between."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.ready: asyncio.Future = loop.create_future()
        self.ended: asyncio.Future = loop.create_future()  # set when the model process has closed its answers
        self._pending: dict[int, asyncio.Future] = {READY: self.ready}
        self._ids = itertools.count(READY + 1)
        self._frames = Frames()
        self._calls: dict[str, asyncio.WriteTransport] = {}  # each lane's
        self._loop = loop

    @classmethod
    async def open(cls, calls: dict[str, Any], answers: Any) -> _Channel:
        """The channel over the API process's ends of the pipes (multiprocessing connections, taken over): each
        lane's calls, and the answers."""
        loop = asyncio.get_running_loop()
        channel = cls(loop)
        for lane in LANES:
            channel._calls[lane], _ = await loop.connect_write_pipe(asyncio.BaseProtocol, _pipe(calls[lane], "wb"))
        await loop.connect_read_pipe(lambda: channel, _pipe(answers, "rb"))
        return channel

    def call(self, method: str, *args: Any) -> asyncio.Future:
        calls = self._calls.get(lane_of(method))
        if self.ended.done() or calls is None or calls.is_closing():
            raise ModelProcessStopped("The embedding model process is not running.")
        call_id = next(self._ids)
        future = self._pending[call_id] = self._loop.create_future()
        calls.write(frame((call_id, method, args)))
        return future

    def close(self) -> None:
        """Close the calls' pipes (once what is buffered is written): the model process finishes the calls it was
        sent, then exits."""
        for calls in self._calls.values():
            calls.close()

    def data_received(self, data: bytes) -> None:
        for call_id, ok, value in self._frames.feed(data):
            future = self._pending.pop(call_id, None)
            if future is None or future.done():  # its caller gave up on it (cancelled)
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(ModelError(*value))

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 (the model process has ended)
        pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            if not future.done():
                future.set_exception(ModelProcessStopped("The embedding model process stopped; retry."))
        if not self.ended.done():
            self.ended.set_result(None)
        self.close()


def _pipe(connection: Any, mode: str) -> BinaryIO:
    """A multiprocessing connection's pipe as a file the event loop can take (it owns, and closes, a copy)."""
    fd = os.dup(connection.fileno())
    connection.close()
    return cast(BinaryIO, open(fd, mode, buffering=0))  # noqa: SIM115 (closed by its transport)


class ModelProcess:
    """The model in a process of its own (see the module's docstring); `start()` returns once it has loaded."""

    def __init__(self, config: ModelConfig, log_level: str = "info", log_format: LogFormat = "text"):
        self.config = config
        self._log = (log_level, log_format)
        self.facts: ModelFacts | None = None
        self.restarts = 0
        self._channel: _Channel | None = None  # None while no model process is ready
        self._process: Any = None
        self._closing = False
        self._supervisor: asyncio.Task | None = None

    @classmethod
    async def start(cls, config: ModelConfig, log_level: str = "info",
                    log_format: LogFormat = "text") -> ModelProcess:
        model = cls(config, log_level, log_format)
        channel = await model._spawn(config)
        model._supervisor = asyncio.create_task(model._supervise(channel), name="embedding-model-process")
        return model

    @property
    def alive(self) -> bool:
        return self._channel is not None

    def call(self, method: str, *args: Any) -> asyncio.Future:
        """`Models.<method>(*args)` in the model process; its answer or error on the future."""
        if self._channel is None:
            raise ModelProcessStopped("The embedding model process is starting again; retry.")
        return self._channel.call(method, *args)

    async def run(self, method: str, *args: Any) -> Any:
        return await self.call(method, *args)

    # The batcher's call returns the call's future itself, written at once: a coroutine would become a task of its
    # own, a turn of the loop before the write and one after the answer (~0.04 ms a query: bench/results.md).
    def embed(self, texts: list[str], limits: list[int | None], cuts: list[int | None]) -> asyncio.Future:
        """A batch's tokens and vectors, counted and embedded in one call (Models.embed)."""
        return self.call("embed", texts, limits, cuts)

    async def decode(self, token_ids: list[list[int]]) -> list[str]:
        texts: list[str] = []
        for piece in slices(token_ids, SLICE_TOKEN_IDS):
            texts += await self.run("decode", piece)
        return texts

    async def close(self) -> None:
        self._closing = True
        if self._channel is not None:
            self._channel.close()
        if self._supervisor is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._supervisor, 30)
        await asyncio.to_thread(self._end, self._process)

    async def _spawn(self, config: ModelConfig) -> _Channel:
        context = multiprocessing.get_context("spawn")
        calls = {lane: context.Pipe(duplex=False) for lane in LANES}  # (reading end, writing end)
        answers_in, answers_out = context.Pipe(duplex=False)
        process = context.Process(target=serve, args=(config, {lane: ends[0] for lane, ends in calls.items()},
                                                       answers_out, *self._log),
                                  name="embedding-model", daemon=True)
        process.start()
        # Only the model process holds these ends now: its exit closes them, which the reader sees.
        for reading, _ in calls.values():
            reading.close()
        answers_out.close()
        channel = await _Channel.open({lane: ends[1] for lane, ends in calls.items()}, answers_in)
        try:
            self.facts = await channel.ready
        except BaseException as error:
            channel.close()
            await asyncio.to_thread(self._end, process)
            if isinstance(error, ModelProcessStopped):  # it died without saying why (a signal, a crash)
                raise RuntimeError(f"The embedding model process exited with code {process.exitcode} while "
                                   "loading the model.") from error
            raise
        self._process, self._channel = process, channel
        return channel

    async def _supervise(self, channel: _Channel) -> None:
        """Wait for the model process to end; unless closing, start it again (with growing delays while it
        fails to load)."""
        while True:
            await channel.ended
            self._channel = None
            if self._closing:
                return
            await asyncio.to_thread(self._end, self._process)
            logger.error("the embedding model process stopped (exit code %s); starting it again",
                         self._process.exitcode)
            self.restarts += 1
            config = self.config.with_hint(self.facts.hint if self.facts else None)
            for attempt in itertools.count():
                await asyncio.sleep(RESTART_DELAYS[min(attempt, len(RESTART_DELAYS) - 1)])
                if self._closing:
                    return
                try:
                    channel = await self._spawn(config)
                except Exception as error:
                    logger.error("the embedding model process did not start again: %s", error)
                    continue
                if self._closing:  # close() came while it loaded
                    channel.close()
                break

    @staticmethod
    def _end(process: Any, timeout: float = 10) -> None:
        if process is None:
            return
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
