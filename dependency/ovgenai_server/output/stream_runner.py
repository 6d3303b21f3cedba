"""The one runner of a prepared request: its engine outputs streamed through a writer (each API's stream format), or
collected whole for a unary answer; either way the request's metrics and log line are recorded once, and a failure
after the headers goes out in the stream's own format."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ovgenai_common.errors import APIError, ErrorKind

from ..engine.contract.types import EngineError, RequestOutput, RequestTimings, SequenceDelta
from ..metrics import ServerMetrics
from ..request.prepared import Prepared
from .accounting import record, usage

logger = logging.getLogger("ovgenai_server.requests")

T_co = TypeVar("T_co", covariant=True)


class StreamWriter(Protocol[T_co]):
    """One API's stream format: what goes out for each delta, at the end, and on a failure after the headers."""

    rid: str

    def delta(self, delta: SequenceDelta) -> Sequence[T_co]: ...

    def end(self, counted: dict[str, int]) -> Sequence[T_co]: ...

    def error(self, message: str, kind: ErrorKind) -> Sequence[T_co]: ...


@dataclass
class _Progress:
    started: float = field(default_factory=time.perf_counter)
    ttft: float | None = None
    last: float = 0.0
    completion_tokens: int = 0
    finishes: list[str | None] = field(default_factory=list)
    ended: set[int] = field(default_factory=set)


async def stream(prep: Prepared, metrics: ServerMetrics, writer: StreamWriter[T_co]) -> AsyncGenerator[T_co, None]:
    """What the writer makes of the request's outputs, as they come; its places given back when it ends."""
    try:
        async with contextlib.aclosing(_stream(prep, metrics, writer)) as items:
            async for item in items:
                yield item
    finally:
        prep.admitted.release()


async def _stream(prep: Prepared, metrics: ServerMetrics, writer: StreamWriter[T_co]) -> AsyncGenerator[T_co, None]:
    progress, model = _Progress(), prep.model.name
    itl = metrics.itl.labels(model)
    output: RequestOutput | None = None
    try:
        async with contextlib.aclosing(prep.generate()) as outputs:
            async for output in outputs:
                now = time.perf_counter()
                if progress.ttft is None:
                    progress.ttft = now - progress.started
                else:
                    itl.observe(now - progress.last)
                progress.last = now
                for delta in output.deltas:
                    for item in _delta(writer, delta, progress):
                        yield item
        if output is not None and output.finished:
            # The engine ended a sequence without a reason (in a step that gave it no token): close its choice.
            for index in sorted(set(range(prep.params.n)) - progress.ended):
                for item in _delta(writer, SequenceDelta(index, "", 0, "stop"), progress):
                    yield item
        counted = usage(output.prompt_tokens if output is not None else len(prep.prompt_ids),
                        progress.completion_tokens)
        for item in writer.end(counted):
            yield item
        record(metrics, writer.rid, model, progress.started, progress.ttft, counted, progress.finishes,
               output.timings if output is not None else None)
    except EngineError as error:
        metrics.request_failure.labels(model).inc()
        logger.warning("request %s failed mid-stream: %s", writer.rid, error)
        for item in writer.error(str(error), error_kind(error)):
            yield item
    except asyncio.CancelledError:
        logger.info("request %s cancelled by client disconnect after %d tokens", writer.rid,
                    progress.completion_tokens)
        raise
    except Exception:  # after the headers a status can no longer say it: the stream ends with an error event
        metrics.request_failure.labels(model).inc()
        logger.exception("request %s failed mid-stream", writer.rid)
        for item in writer.error("Internal server error.", ErrorKind.INTERNAL):
            yield item


def error_kind(error: EngineError) -> ErrorKind:
    """How an engine failure is said to the client: 503 when a retry may help (the engine restarts), else 400."""
    return ErrorKind.UNAVAILABLE if error.retryable else ErrorKind.INVALID_REQUEST


def _delta(writer: StreamWriter[T_co], delta: SequenceDelta, progress: _Progress) -> Sequence[T_co]:
    progress.completion_tokens += delta.token_count
    if delta.finish_reason is not None:
        progress.finishes.append(delta.finish_reason)
        progress.ended.add(delta.index)
    return writer.delta(delta)


@dataclass
class Choice:
    """One choice of a unary answer, collected."""

    text: list[str] = field(default_factory=list)
    tokens: int = 0
    finish_reason: str | None = None
    logprobs: list[float] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    prompt_logprobs: list[float | None] = field(default_factory=list)
    stop_reason: str | None = None  # the stop string it ended at

    def add(self, delta: SequenceDelta, with_ids: bool) -> None:
        self.text.append(delta.text)
        self.tokens += delta.token_count
        self.finish_reason = delta.finish_reason or self.finish_reason
        self.stop_reason = delta.stop_reason or self.stop_reason
        if delta.logprobs:
            self.logprobs.extend(delta.logprobs)
        if delta.token_ids and with_ids:
            self.token_ids.extend(delta.token_ids)
        if delta.prompt_logprobs:
            self.prompt_logprobs.extend(delta.prompt_logprobs)


@dataclass
class Collected:
    """A unary request's choices by index, with what its metrics and usage need."""

    choices: dict[int, Choice]
    prompt_tokens: int
    ttft: float | None
    timings: RequestTimings | None


async def collect(prep: Prepared, metrics: ServerMetrics, started: float) -> Collected:
    """Every output of the request; an engine failure is an APIError (503 when a retry may help, else 400)."""
    choices: dict[int, Choice] = {}
    prompt_tokens, ttft, timings = len(prep.prompt_ids), None, None
    try:
        async with contextlib.aclosing(prep.generate()) as outputs:
            async for output in outputs:
                if ttft is None:
                    ttft = time.perf_counter() - started
                prompt_tokens = output.prompt_tokens
                timings = output.timings or timings
                for delta in output.deltas:
                    choices.setdefault(delta.index, Choice()).add(delta, bool(prep.params.logprobs))
    except EngineError as error:
        metrics.request_failure.labels(prep.model.name).inc()
        raise APIError(error_kind(error), str(error)) from error
    for index in range(prep.params.n):
        choices.setdefault(index, Choice(finish_reason="stop"))
    return Collected(choices, prompt_tokens, ttft, timings)


class _TextWriter:
    """The generated text alone, for fronts with no stream format to carry an error (TorchServe's): a failure
    raises APIError."""

    def __init__(self) -> None:
        self.rid = f"cmpl-{uuid.uuid4().hex}"

    def delta(self, delta: SequenceDelta) -> list[str]:
        return [delta.text] if delta.text else []

    def end(self, counted: dict[str, int]) -> list[str]:  # noqa: ARG002 - nothing follows the text
        return []

    def error(self, message: str, kind: ErrorKind) -> list[str]:
        raise APIError(kind, message)


def text_stream(prep: Prepared, metrics: ServerMetrics) -> AsyncGenerator[str, None]:
    """The generated text of a one-choice request as it comes, with the same metrics and log line as the OpenAI
    routes."""
    return stream(prep, metrics, _TextWriter())
