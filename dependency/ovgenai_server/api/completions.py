"""Text completions: each prompt of a request prepared (tokenized, its parameters checked, echo decided), admitted
together, then answered whole or streamed as `text_completion` chunks."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import msgspec

from ovgenai_common.errors import ErrorKind, invalid
from ovgenai_common.sse import DONE_FRAME, error_frame

from ..engine.contract.types import SequenceDelta
from ..metrics import ServerMetrics
from ..models.registry import ModelFacts
from ..output.accounting import record, usage
from ..output.chunks import StreamChunks
from ..output.logprobs import HeldScores, completion_logprobs
from ..output.stream_runner import Choice, Collected, collect, stream
from ..request.admission import admit
from ..request.prepared import Prepared
from ..request.prompts import completion_prompts
from ..request.sampling import completion_logprobs_asked, params_for
from ..request.structured_output import check_compiles
from ..state import ServerState
from .protocol import CompletionRequest


async def prepare(state: ServerState, request: CompletionRequest, client: str = "") -> list[Prepared]:
    """Each prompt checked and tokenized on a worker thread, the grammar compiled, all admitted together for
    `client` (deps.client_of). A model unloaded while idle is loaded again first."""
    await state.models.awake(request.model)
    request = state.seeded(request)
    preps = await asyncio.to_thread(build, state, request)
    first = preps[0]
    await check_compiles(first.model, first.params.structured_output)  # one grammar for every prompt
    ticket = admit(first.model, state.limits, state.share_of(first.model), client,
                   [prep.prompt_ids for prep in preps], sum(prep.places for prep in preps))
    for prep in preps:
        prep.ticket = ticket
    return preps


def build(state: ServerState, request: CompletionRequest) -> list[Prepared]:
    """Each prompt of a completion request checked and tokenized, with its engine parameters (not yet admitted)."""
    request.refuse_unknown_fields()
    if request.suffix:
        raise invalid("'suffix' (fill-in-the-middle) is not supported.", "suffix")
    model = state.models.named(request.model)
    logprobs = completion_logprobs_asked(request)
    echo = _engine_echo(request, model.facts, logprobs)
    out = []
    for prompt, text in completion_prompts(model, request.prompt):
        params = params_for(request, model.facts, model.runtime.kv_cache_tokens, state.limits.max_n,
                            len(prompt.token_ids), logprobs)
        if echo:
            if params.num_beams > 1:
                raise invalid("'best_of' > 1 (beam search) cannot be combined with 'echo' here.", "best_of")
            params = msgspec.structs.replace(params, echo=True)
        out.append(Prepared(model, prompt, params, text=text))
    return out


def _engine_echo(request: CompletionRequest, facts: ModelFacts, logprobs: int) -> bool:
    """Whether the engine must give the prompt back: to score it (echo + logprobs), or because it is all there is
    to answer (max_tokens 0, which only echo allows). A plain echo is the prompt's text, added by the server."""
    if request.max_tokens == 0 and not request.echo:
        raise invalid("'max_tokens' must be at least 1 unless 'echo' is set (the prompt alone).", "max_tokens")
    if not request.echo or not (logprobs or request.max_tokens == 0):
        return False
    if logprobs and facts.prefix_caching:
        # openvino_genai scores only the prompt tokens it computes: a prefix taken from the cache would come back
        # without log probabilities. Refused rather than answered with holes.
        raise invalid(
            f"'echo' with 'logprobs' needs model '{facts.name}' served without prefix caching: the engine does not "
            "score prompt tokens it takes from the cache. Start the server with --enable_prefix_caching false.",
            "echo",
        )
    return True


async def answer(request: CompletionRequest, preps: list[Prepared], metrics: ServerMetrics) -> dict[str, Any]:
    """The unary `text_completion`: the choices of every prompt, prompt by prompt."""
    started = time.perf_counter()
    rid = f"cmpl-{uuid.uuid4().hex}"
    # A request takes at most the places it was admitted with at once: a longer prompt list is served in turns.
    ticket = preps[0].admitted
    turns = asyncio.Semaphore(max(1, ticket.places // preps[0].places))

    async def in_turn(prep: Prepared) -> Collected:
        async with turns:
            return await collect(prep, metrics, started)

    try:
        results = await asyncio.gather(*(in_turn(p) for p in preps))
    finally:
        ticket.release()
    out, prompt_total, completion_total = [], 0, 0
    for p_index, (prep, collected) in enumerate(zip(preps, results, strict=True)):
        prompt_total += collected.prompt_tokens
        counted = usage(collected.prompt_tokens, sum(c.tokens for c in collected.choices.values()))
        completion_total += counted["completion_tokens"]
        for index, choice in sorted(collected.choices.items()):
            out.append({"index": p_index * request.n + index, "text": _text(request, prep, choice),
                        "logprobs": _logprobs(request, prep, choice), "finish_reason": choice.finish_reason or "stop",
                        "stop_reason": choice.stop_reason})  # vLLM's: the stop string the text ended at
        record(metrics, rid, prep.model.name, started, collected.ttft, counted,
               [c.finish_reason or "stop" for c in collected.choices.values()], collected.timings)
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": preps[0].model.name,
            "choices": out, "usage": usage(prompt_total, completion_total)}


def _text(request: CompletionRequest, prep: Prepared, choice: Choice) -> str:
    text = "".join(choice.text)
    return prep.echo_text() + text if request.echo else text


def _logprobs(request: CompletionRequest, prep: Prepared, choice: Choice) -> dict[str, Any] | None:
    if request.logprobs is None:
        return None
    token_ids, values = choice.token_ids, list[float | None](choice.logprobs)
    if request.echo:  # the prompt's tokens first, as OpenAI and vLLM list them
        token_ids, values = prep.prompt_ids + token_ids, choice.prompt_logprobs + values
    return completion_logprobs(prep.model.prompts, token_ids, values, alternatives=bool(request.logprobs))


async def streamed(request: CompletionRequest, prep: Prepared, metrics: ServerMetrics) -> AsyncGenerator[bytes, None]:
    writer = CompletionStream(request, prep)
    for frame in writer.start():
        yield frame
    async for frame in stream(prep, metrics, writer):
        yield frame


class CompletionStream:
    """A completion as SSE frames; with echo, the prompt first (with logprobs, once the engine has scored it)."""

    def __init__(self, request: CompletionRequest, prep: Prepared):
        self.chunks = StreamChunks(f"cmpl-{uuid.uuid4().hex}", "completion", prep.model.name)
        self.rid = self.chunks.rid
        self.prep, self.n = prep, request.n
        self.logprobs = request.logprobs is not None
        self.alternatives = bool(request.logprobs)  # logprobs 1: the chosen token listed as its one alternative
        self.include_usage = request.stream_options is not None and request.stream_options.include_usage
        self.echo = prep.echo_text() if request.echo else ""
        self.scored = request.echo and self.logprobs  # each choice's echo waits for the engine to score the prompt
        self.prompt_scores: dict[int, list[float | None]] = {}
        self.held = HeldScores()

    def start(self) -> list[bytes]:
        """A plain echo goes out at once: nothing to wait for."""
        return [self._chunk(index, self.echo) for index in range(self.n)] if self.echo and not self.scored else []

    def delta(self, delta: SequenceDelta) -> list[bytes]:
        frames = []
        if self.scored and delta.prompt_logprobs:
            scores = self.prompt_scores.setdefault(delta.index, [])
            scores.extend(delta.prompt_logprobs)  # the prompt may come scored in pieces
            if len(scores) >= len(self.prep.prompt_ids):
                prompt_logprobs = completion_logprobs(self.prep.model.prompts, self.prep.prompt_ids, scores,
                                                      self.alternatives)
                frames.append(self._chunk(delta.index, self.echo, logprobs=prompt_logprobs))
        if self.logprobs:
            self.held.add(delta)
        if delta.text:
            frames.append(self._chunk(delta.index, delta.text, logprobs=self._scores(delta.index)))
        if delta.finish_reason is not None:
            frames.append(self._chunk(delta.index, "", delta.finish_reason, self._scores(delta.index, at_end=True),
                                      delta.stop_reason))
        return frames

    def end(self, counted: dict[str, int]) -> list[bytes]:
        return [self.chunks.usage(counted), DONE_FRAME] if self.include_usage else [DONE_FRAME]

    def error(self, message: str, kind: ErrorKind) -> list[bytes]:
        return [error_frame(message, kind), DONE_FRAME]

    def _chunk(self, index: int, text: str, finish: str | None = None, logprobs: Any = None,
               stop_reason: str | None = None) -> bytes:
        return self.chunks.choice(index, finish, logprobs, stop_reason, text=text)

    def _scores(self, index: int, at_end: bool = False) -> Any:
        ids, values = self.held.take(index)
        if not self.logprobs or (at_end and not ids):
            return None
        return completion_logprobs(self.prep.model.prompts, ids, values, self.alternatives)
