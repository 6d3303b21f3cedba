"""Chat and text completions: requests in, OpenAI responses and stream frames out. The engine is injected."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.protocol import ChatCompletionRequest, CompletionRequest
from ovgenai_common.sse import DONE_FRAME, error_frame

from .chunks import StreamChunks
from .engine.types import Engine, EngineError, RequestOutput, RequestTimings, SequenceDelta
from .metrics import ServerMetrics
from .settings import BackendSettings
from .validation import Prepared, admit, engine_for, prepare_chat, prepare_completion

logger = logging.getLogger("ovgenai_server.requests")


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    tokens: int = 0
    finish_reason: str | None = None
    logprobs: list[float] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    prompt_logprobs: list[float | None] = field(default_factory=list)


class Serving:
    def __init__(self, engines: dict[str, Engine], settings: BackendSettings, metrics: ServerMetrics):
        self.engines = engines
        self.settings = settings
        self.metrics = metrics
        self.started_at = time.time()

    # ---- request preparation (validation.py) --------------------------------------------------------------

    def engine_for(self, model: str | None) -> Engine:
        return engine_for(self.engines, model)

    # Templating and tokenizing run on worker threads (a long prompt must not stall other streams); a grammar is
    # compiled before admission (engine/grammar.py), so the engine only ever sees grammars its compiler takes.

    async def prepare_chat(self, request: ChatCompletionRequest) -> Prepared:
        prep = await asyncio.to_thread(prepare_chat, self.engines, self.settings, request)
        await _check_grammar(prep)
        admit(prep.engine, self.settings, [prep.prompt_ids], request.n)
        return prep

    async def prepare_completion(self, request: CompletionRequest) -> list[Prepared]:
        preps = await asyncio.to_thread(prepare_completion, self.engines, self.settings, request)
        await _check_grammar(preps[0])  # one request: the same parameters for every prompt
        admit(preps[0].engine, self.settings, [prep.prompt_ids for prep in preps], request.n * len(preps))
        return preps

    # ---- chat --------------------------------------------------------------------------------------------

    async def chat(self, request: ChatCompletionRequest, prep: Prepared) -> dict[str, Any]:
        started = time.perf_counter()
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        choices, prompt_tokens, ttft, timings = await self._collect(prep, started)
        out = []
        for index, choice in sorted(choices.items()):
            text = "".join(choice.text)
            message: dict[str, Any] = {"role": "assistant", "content": text}
            finish = choice.finish_reason or "stop"
            if prep.output.active:
                reader = prep.output.choice()
                message = reader.message(reader.feed(text) + reader.finish())
                finish = reader.finish_reason(finish)
            out.append(
                {
                    "index": index,
                    "message": message,
                    "logprobs": self._chat_logprobs(prep.engine, choice.token_ids, choice.logprobs)
                    if request.logprobs
                    else None,
                    "finish_reason": finish,
                }
            )
        usage = _usage(prompt_tokens, sum(c.tokens for c in choices.values()))
        self._finish(rid, prep, started, ttft, usage, [c["finish_reason"] for c in out], timings)
        return {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": prep.engine.name,
            "choices": out,
            "usage": usage,
        }

    async def chat_stream(self, request: ChatCompletionRequest, prep: Prepared) -> AsyncGenerator[bytes, None]:
        chunks = StreamChunks(f"chatcmpl-{uuid.uuid4().hex}", "chat", prep.engine.name)
        # Reasoning and tool calls are read from the text as it streams (chat_output.py); a plain answer is sent as
        # the engine gives it.
        readers = {index: prep.output.choice() for index in range(request.n)} if prep.output.active else {}
        held_logprobs: dict[int, tuple[list[int], list[float]]] = {}

        def chunk(index: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
            return chunks.choice(index, finish, logprobs, delta=delta)

        # The role travels with each choice's first generated text (as vLLM and OVMS send it), never ahead of it:
        # benchmark clients take the first chunk with `choices` as the first token, so an early empty role chunk
        # would report a time to first token that never waited for the engine.
        roleless = set(range(request.n))

        def with_role(index: int, delta: dict[str, Any]) -> dict[str, Any]:
            if index in roleless:
                roleless.discard(index)
                return {"role": "assistant", **delta}
            return delta

        def logprobs_of(index: int, at_end: bool = False) -> Any:
            """The log probabilities of the choice's tokens not sent yet; at its end, None when there are none."""
            held_ids, held_values = held_logprobs.pop(index, ([], []))
            if not request.logprobs or (at_end and not held_ids):
                return None
            return self._chat_logprobs(prep.engine, held_ids, held_values)

        def on_delta(delta: SequenceDelta) -> list[bytes]:
            index = delta.index
            if request.logprobs:
                held = held_logprobs.setdefault(index, ([], []))
                held[0].extend(delta.token_ids or [])
                held[1].extend(delta.logprobs or [])
            if readers:
                reader = readers[index]
                parts = reader.feed(delta.text) if delta.text else []
                if delta.finish_reason is not None:
                    parts += reader.finish()
            else:
                parts = [{"content": delta.text}] if delta.text else []
            # Tokens' log probabilities go with the first part they produced; a token that produced none (part of a
            # character, a tag being read, the end token) waits for the next part, or for the choice's last chunk.
            frames = []
            if parts:
                frames.append(chunk(index, with_role(index, parts[0]), logprobs=logprobs_of(index)))
                frames += [chunk(index, part) for part in parts[1:]]
            if delta.finish_reason is not None:
                finish = readers[index].finish_reason(delta.finish_reason) if readers else delta.finish_reason
                if index in roleless:  # a choice that ends without any text still opens with the role
                    frames.append(chunk(index, with_role(index, {"content": ""})))
                frames.append(chunk(index, {}, finish, logprobs=logprobs_of(index, at_end=True)))
            return frames

        async with contextlib.aclosing(self._stream(chunks, prep, on_delta, request.stream_options)) as items:
            async for item in items:
                yield item

    # ---- completions -------------------------------------------------------------------------------------

    async def completion(self, request: CompletionRequest, preps: list[Prepared]) -> dict[str, Any]:
        started = time.perf_counter()
        rid = f"cmpl-{uuid.uuid4().hex}"
        results = await asyncio.gather(*(self._collect(p, started) for p in preps))
        out, prompt_total, completion_total = [], 0, 0
        for p_index, (prep, (choices, prompt_tokens, ttft, timings)) in enumerate(zip(preps, results, strict=True)):
            prompt_total += prompt_tokens
            usage = _usage(prompt_tokens, sum(c.tokens for c in choices.values()))
            for index, choice in sorted(choices.items()):
                completion_total += choice.tokens
                text = "".join(choice.text)
                if request.echo:
                    text = (prep.prompt_text or prep.engine.decode(prep.prompt_ids)) + text
                logprobs = None
                if request.logprobs is not None:
                    token_ids, values = choice.token_ids, list[float | None](choice.logprobs)
                    if request.echo:  # the prompt's tokens first, as OpenAI and vLLM list them
                        token_ids, values = prep.prompt_ids + token_ids, choice.prompt_logprobs + values
                    logprobs = self._completion_logprobs(prep.engine, token_ids, values)
                out.append(
                    {
                        "index": p_index * request.n + index,
                        "text": text,
                        "logprobs": logprobs,
                        "finish_reason": choice.finish_reason or "stop",
                    }
                )
            self._finish(rid, prep, started, ttft, usage, [c.finish_reason or "stop" for c in choices.values()],
                         timings)
        return {
            "id": rid,
            "object": "text_completion",
            "created": int(time.time()),
            "model": preps[0].engine.name,
            "choices": out,
            "usage": _usage(prompt_total, completion_total),
        }

    async def completion_stream(self, request: CompletionRequest, prep: Prepared) -> AsyncGenerator[bytes, None]:
        chunks = StreamChunks(f"cmpl-{uuid.uuid4().hex}", "completion", prep.engine.name)

        def chunk(index: int, text: str, finish: str | None = None, logprobs: Any = None) -> bytes:
            return chunks.choice(index, finish, logprobs, text=text)

        prompt_text = (prep.prompt_text or prep.engine.decode(prep.prompt_ids)) if request.echo else ""
        scored = request.echo and request.logprobs is not None
        if request.echo and not scored:  # nothing to wait for: the prompt goes out at once
            for index in range(request.n):
                yield chunk(index, prompt_text)
        # With logprobs, each choice's echo waits for the engine to score the whole prompt (it may come in pieces).
        prompt_scores: dict[int, list[float | None]] = {}
        # A token without text of its own (part of a character, the end token): its log probability goes with the
        # next text, or with the choice's last chunk.
        held_logprobs: dict[int, tuple[list[int], list[float]]] = {}

        def logprobs_of(index: int, at_end: bool = False) -> Any:
            held_ids, held_values = held_logprobs.pop(index, ([], []))
            if request.logprobs is None or (at_end and not held_ids):
                return None
            return self._completion_logprobs(prep.engine, held_ids, held_values)

        def on_delta(delta: SequenceDelta) -> list[bytes]:
            frames = []
            if scored and delta.prompt_logprobs:
                scores = prompt_scores.setdefault(delta.index, [])
                scores.extend(delta.prompt_logprobs)
                if len(scores) >= len(prep.prompt_ids):
                    prompt_logprobs = self._completion_logprobs(prep.engine, prep.prompt_ids, scores)
                    frames.append(chunk(delta.index, prompt_text, logprobs=prompt_logprobs))
            if request.logprobs is not None:
                held = held_logprobs.setdefault(delta.index, ([], []))
                held[0].extend(delta.token_ids or [])
                held[1].extend(delta.logprobs or [])
            if delta.text:
                frames.append(chunk(delta.index, delta.text, logprobs=logprobs_of(delta.index)))
            if delta.finish_reason is not None:
                frames.append(chunk(delta.index, "", delta.finish_reason, logprobs=logprobs_of(delta.index, True)))
            return frames

        async with contextlib.aclosing(self._stream(chunks, prep, on_delta, request.stream_options)) as items:
            async for item in items:
                yield item

    async def text_stream(self, prep: Prepared) -> AsyncGenerator[str, None]:
        """The generated text of a one-choice request as it comes, with the same metrics and log line as the OpenAI
        routes; for fronts with no stream format to carry an error (TorchServe's), a failure raises APIError."""

        def fail(message: str, kind: ErrorKind) -> None:
            raise APIError(kind, message)

        chunks = StreamChunks(f"cmpl-{uuid.uuid4().hex}", "completion", prep.engine.name)
        texts = self._stream(chunks, prep, lambda d: [d.text] if d.text else [], None, on_error=fail, done=None)
        async with contextlib.aclosing(texts):
            async for text in texts:
                yield text

    # ---- shared machinery --------------------------------------------------------------------------------

    async def _collect(
        self, prep: Prepared, started: float
    ) -> tuple[dict[int, _Choice], int, float | None, RequestTimings | None]:
        choices: dict[int, _Choice] = {}
        prompt_tokens, ttft, timings = len(prep.prompt_ids), None, None
        try:
            async with contextlib.aclosing(prep.generate()) as outputs:
                async for output in outputs:
                    if ttft is None:
                        ttft = time.perf_counter() - started
                    prompt_tokens = output.prompt_tokens
                    timings = output.timings or timings
                    for delta in output.deltas:
                        choice = choices.setdefault(delta.index, _Choice())
                        choice.text.append(delta.text)
                        choice.tokens += delta.token_count
                        choice.finish_reason = delta.finish_reason or choice.finish_reason
                        if delta.logprobs:
                            choice.logprobs.extend(delta.logprobs)
                        if delta.token_ids and prep.params.logprobs:
                            choice.token_ids.extend(delta.token_ids)
                        if delta.prompt_logprobs:
                            choice.prompt_logprobs.extend(delta.prompt_logprobs)
        except EngineError as error:
            self.metrics.request_failure.labels(prep.engine.name).inc()
            kind = ErrorKind.UNAVAILABLE if error.retryable else ErrorKind.INVALID_REQUEST
            raise APIError(kind, str(error)) from error
        for index in range(prep.params.n):
            choices.setdefault(index, _Choice(finish_reason="stop"))
        return choices, prompt_tokens, ttft, timings

    async def _stream(
        self,
        chunks: StreamChunks,
        prep: Prepared,
        on_delta: Callable[[SequenceDelta], list[Any]],
        stream_options: Any,
        *,
        on_error: Callable[[str, ErrorKind], Any] = error_frame,
        done: Any = DONE_FRAME,
    ) -> AsyncGenerator[Any, None]:
        started = time.perf_counter()
        rid, model = chunks.rid, prep.engine.name
        ttft, last = None, started
        completion_tokens, finishes, ended = 0, [], set()
        itl = self.metrics.itl.labels(model)
        output: RequestOutput | None = None
        try:
            async with contextlib.aclosing(prep.generate()) as outputs:
                async for output in outputs:
                    now = time.perf_counter()
                    if ttft is None:
                        ttft = now - started
                    else:
                        itl.observe(now - last)
                    last = now
                    for delta in output.deltas:
                        completion_tokens += delta.token_count
                        if delta.finish_reason is not None:
                            finishes.append(delta.finish_reason)
                            ended.add(delta.index)
                        for item in on_delta(delta):
                            yield item
            if output is not None and output.finished:
                # The engine ended a sequence without a reason (in a step that gave it no token): close its choice.
                for index in sorted(set(range(prep.params.n)) - ended):
                    for item in on_delta(SequenceDelta(index, "", 0, "stop")):
                        yield item
                    finishes.append("stop")
            usage = _usage(output.prompt_tokens if output is not None else len(prep.prompt_ids), completion_tokens)
            if stream_options is not None and stream_options.include_usage:
                yield chunks.usage(usage)
            self._finish(rid, prep, started, ttft, usage, finishes, output.timings if output is not None else None)
        except EngineError as error:
            self.metrics.request_failure.labels(model).inc()
            logger.warning("request %s failed mid-stream: %s", rid, error)
            kind = ErrorKind.UNAVAILABLE if error.retryable else ErrorKind.INVALID_REQUEST
            yield on_error(str(error), kind)
        except asyncio.CancelledError:
            logger.info("request %s cancelled by client disconnect after %d tokens", rid, completion_tokens)
            raise
        except Exception:  # after the headers a status can no longer say it: the stream ends with an error event
            self.metrics.request_failure.labels(model).inc()
            logger.exception("request %s failed mid-stream", rid)
            yield on_error("Internal server error.", ErrorKind.INTERNAL)
        if done is not None:
            yield done

    def _finish(
        self, rid: str, prep: Prepared, started: float, ttft: float | None, usage: dict, finishes: list,
        timings: RequestTimings | None = None,
    ) -> None:
        model = prep.engine.name
        elapsed = time.perf_counter() - started
        completion_tokens = usage["completion_tokens"]
        self.metrics.prompt_tokens.labels(model).inc(usage["prompt_tokens"])
        self.metrics.generation_tokens.labels(model).inc(completion_tokens)
        if ttft is not None:
            self.metrics.ttft.labels(model).observe(ttft)
        self.metrics.e2e.labels(model).observe(elapsed)
        if timings is not None:
            self.metrics.queue_time.labels(model).observe(timings.queue)
            self.metrics.prefill_time.labels(model).observe(timings.prefill)
            self.metrics.decode_time.labels(model).observe(timings.decode)
        for reason in finishes:
            self.metrics.request_success.labels(model, reason or "stop").inc()
        current = trace.get_current_span()  # the request's server span when traced
        if current.is_recording():
            current.set_attributes(_span_attributes(model, usage, ttft, timings))
        logger.info(
            "request %s model=%s prompt_tokens=%d completion_tokens=%d ttft_ms=%.1f duration_ms=%.1f finish=%s",
            rid, model, usage["prompt_tokens"], completion_tokens, (ttft or 0) * 1000, elapsed * 1000,
            ",".join(f or "stop" for f in finishes),
        )

    @staticmethod
    def _chat_logprobs(engine: Engine, token_ids: list[int], logprobs: list[float]) -> dict[str, Any]:
        content = []
        for token_id, logprob in zip(token_ids, logprobs, strict=False):
            token = engine.decode([token_id])
            content.append(
                {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}
            )
        return {"content": content}

    @staticmethod
    def _completion_logprobs(
        engine: Engine, token_ids: list[int], logprobs: list[float] | list[float | None]
    ) -> dict[str, Any]:
        tokens = [engine.decode([t]) for t in token_ids]
        offsets, position = [], 0
        for token in tokens:
            offsets.append(position)
            position += len(token)
        return {
            "tokens": tokens,
            "token_logprobs": list(logprobs[: len(tokens)]),
            "top_logprobs": None,
            "text_offset": offsets,
        }


async def _check_grammar(prep: Prepared) -> None:
    structured = prep.params.structured_output
    if structured is None:
        return
    refusal = await prep.engine.check_structured_output(structured)
    if refusal is not None:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{structured.param}' cannot be used: {refusal}", structured.param)


def _span_attributes(model: str, usage: dict, ttft: float | None, timings: RequestTimings | None) -> dict[str, Any]:
    """What a traced request's span says of its generation (OpenTelemetry's gen_ai names where they exist)."""
    attributes: dict[str, Any] = {"gen_ai.request.model": model,
                                  "gen_ai.usage.input_tokens": usage["prompt_tokens"],
                                  "gen_ai.usage.output_tokens": usage["completion_tokens"]}
    if ttft is not None:
        attributes["ovgenai.time_to_first_token_s"] = ttft
    if timings is not None:
        attributes.update({"ovgenai.queue_time_s": timings.queue, "ovgenai.prefill_time_s": timings.prefill,
                           "ovgenai.decode_time_s": timings.decode})
    return attributes


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
