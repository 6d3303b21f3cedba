"""Chat completions: a request prepared (its tools planned, its conversation built into a prompt, its parameters and
grammar checked, admitted), then answered whole or streamed as `chat.completion.chunk`s."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

from ovgenai_common.errors import ErrorKind
from ovgenai_common.sse import DONE_FRAME, error_frame

from ..engine.contract.types import SequenceDelta
from ..metrics import ServerMetrics
from ..output.accounting import record, usage
from ..output.chunks import StreamChunks
from ..output.logprobs import HeldScores, chat_logprobs
from ..output.stream_runner import collect, stream
from ..request.admission import admit
from ..request.prepared import Prepared
from ..request.prompts import chat_prompt
from ..request.sampling import chat_logprobs_asked, params_for
from ..request.structured_output import check_compiles
from ..state import ServerState
from ..tools.chat_output import final_reason, streamed_parts
from ..tools.choice import plan_tools
from ..tools.reasoning import starts_inside
from .protocol import ChatCompletionRequest


async def prepare(state: ServerState, request: ChatCompletionRequest, client: str = "") -> Prepared:
    """Checked, templated and tokenized on a worker thread (a long prompt must not stall other streams), its grammar
    compiled, admitted for `client` (deps.client_of). A model unloaded while idle is loaded again first."""
    await state.models.awake(request.model)
    request = state.seeded(request)
    prep = await asyncio.to_thread(build, state, request)
    await check_compiles(prep.model, prep.params.structured_output)
    prep.ticket = admit(prep.model, state.limits, state.share_of(prep.model), client, [prep.prompt_ids], prep.places)
    return prep


def build(state: ServerState, request: ChatCompletionRequest) -> Prepared:
    """A chat request checked, templated and tokenized, with its engine parameters (not yet admitted)."""
    request.refuse_unknown_fields()
    model = state.models.named(request.model)
    facts = model.facts
    logprobs = chat_logprobs_asked(request)
    tools = plan_tools(request, facts.tool_format, facts.reasoning_parser is not None, facts.supports_tools)
    text, prompt = chat_prompt(model, request, tools.tools, tools.description)
    params = params_for(request, facts, model.runtime.kv_cache_tokens, state.limits.max_n, len(prompt.token_ids),
                        logprobs, tools.forced)
    output = tools.plan
    if output.reasoning:
        output = replace(output, inside=starts_inside(text))
    return Prepared(model, prompt, params, output)


async def answer(request: ChatCompletionRequest, prep: Prepared, metrics: ServerMetrics) -> dict[str, Any]:
    """The unary `chat.completion`."""
    started = time.perf_counter()
    rid = f"chatcmpl-{uuid.uuid4().hex}"
    try:
        collected = await collect(prep, metrics, started)
    finally:
        prep.admitted.release()
    out: list[dict[str, Any]] = []
    for index, choice in sorted(collected.choices.items()):
        text = "".join(choice.text)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = choice.finish_reason or "stop"
        if prep.output.active:
            reader = prep.output.choice()
            message = reader.message(reader.feed(text) + reader.finish())
            finish = reader.finish_reason(finish)
        logprobs = (chat_logprobs(prep.model.prompts, choice.token_ids, choice.logprobs, bool(request.top_logprobs))
                    if request.logprobs else None)
        out.append({"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish,
                    "stop_reason": choice.stop_reason})  # vLLM's: the stop string the text ended at
    counted = usage(collected.prompt_tokens, sum(c.tokens for c in collected.choices.values()))
    record(metrics, rid, prep.model.name, started, collected.ttft, counted, [c["finish_reason"] for c in out],
           collected.timings)
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": prep.model.name,
            "choices": out, "usage": counted}


def streamed(request: ChatCompletionRequest, prep: Prepared, metrics: ServerMetrics) -> AsyncGenerator[bytes, None]:
    return stream(prep, metrics, ChatStream(request, prep))


class ChatStream:
    """A chat answer as SSE frames. Reasoning and tool calls are read from the text as it streams
    (tools/chat_output.py); a plain answer is sent as the engine gives it."""

    def __init__(self, request: ChatCompletionRequest, prep: Prepared):
        self.chunks = StreamChunks(f"chatcmpl-{uuid.uuid4().hex}", "chat", prep.model.name)
        self.rid = self.chunks.rid
        self.prompts = prep.model.prompts
        self.logprobs = bool(request.logprobs)
        self.alternatives = bool(request.top_logprobs)
        self.include_usage = request.stream_options is not None and request.stream_options.include_usage
        self.readers = {i: prep.output.choice() for i in range(request.n)} if prep.output.active else {}
        self.held = HeldScores()
        # The role travels with each choice's first generated text (as vLLM and OVMS send it), never ahead of it:
        # benchmark clients take the first chunk with `choices` as the first token, so an early empty role chunk
        # would report a time to first token that never waited for the engine.
        self.roleless = set(range(request.n))

    def delta(self, delta: SequenceDelta) -> list[bytes]:
        index = delta.index
        if self.logprobs:
            self.held.add(delta)
        reader = self.readers.get(index)
        parts = streamed_parts(reader, delta)
        # Tokens' log probabilities go with the first part they produced, or with the choice's last chunk.
        frames = []
        if parts:
            frames.append(self._chunk(index, self._with_role(index, parts[0]), logprobs=self._scores(index)))
            frames += [self._chunk(index, part) for part in parts[1:]]
        if delta.finish_reason is not None:
            finish = final_reason(reader, delta.finish_reason)
            if index in self.roleless:  # a choice that ends without any text still opens with the role
                frames.append(self._chunk(index, self._with_role(index, {"content": ""})))
            frames.append(self._chunk(index, {}, finish, self._scores(index, at_end=True), delta.stop_reason))
        return frames

    def end(self, counted: dict[str, int]) -> list[bytes]:
        return [self.chunks.usage(counted), DONE_FRAME] if self.include_usage else [DONE_FRAME]

    def error(self, message: str, kind: ErrorKind) -> list[bytes]:
        return [error_frame(message, kind), DONE_FRAME]

    def _chunk(self, index: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None,
               stop_reason: str | None = None) -> bytes:
        return self.chunks.choice(index, finish, logprobs, stop_reason, delta=delta)

    def _with_role(self, index: int, delta: dict[str, Any]) -> dict[str, Any]:
        if index in self.roleless:
            self.roleless.discard(index)
            return {"role": "assistant", **delta}
        return delta

    def _scores(self, index: int, at_end: bool = False) -> Any:
        """The log probabilities of the choice's tokens not sent yet; at its end, None when there are none."""
        ids, values = self.held.take(index)
        if not self.logprobs or (at_end and not ids):
            return None
        return chat_logprobs(self.prompts, ids, values, self.alternatives)
