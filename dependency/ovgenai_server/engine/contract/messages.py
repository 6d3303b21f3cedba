"""IPC messages between the API process and the engine process (msgpack over ZeroMQ).

One `StepOutputs` message per engine step carries every request's new token ids, so IPC cost scales with steps,
not with tokens × requests.
"""

from __future__ import annotations

import msgspec

from .tuning import Tuning
from .types import GenerationParams, Prompt, RequestTimings, StructuredOutput

VERDICTS_KEPT = 512  # recent grammars and their verdicts: a client repeating one schema pays for it once


class AddRequest(msgspec.Struct, tag=True, array_like=True):
    request_id: int
    prompt: Prompt
    params: GenerationParams
    # time.monotonic() when the API process sent it (CLOCK_MONOTONIC is one clock for every process on the
    # machine): the engine's queue time starts here, so time spent in the socket during a step counts.
    arrival: float = 0.0


class AddGroup(msgspec.Struct, tag=True, array_like=True):
    """Requests the engine adds in one step (the n choices of one request): what they compute does not depend on
    when each arrives."""

    requests: list[AddRequest]


class CheckGrammar(msgspec.Struct, tag=True, array_like=True):
    """Whether the engine's compiler takes a grammar, asked before admission; answered by GrammarStarted, then
    GrammarVerdict (or GrammarBusy at once)."""

    check_id: int
    structured: StructuredOutput


class Abort(msgspec.Struct, tag=True, array_like=True):
    request_id: int


class Shutdown(msgspec.Struct, tag=True, array_like=True):
    pass


class Ready(msgspec.Struct, tag=True, array_like=True):
    eos_token_ids: list[int]
    tuning: Tuning | None = None  # what autotune chose and measured, when it ran (engine/engine_process/autotune.py)
    kv_cache_tokens: int | None = None  # what the KV cache holds, all sequences together (engine/contract/kv_cache.py)


class GrammarStarted(msgspec.Struct, tag=True, array_like=True):
    check_id: int  # its grammar's compile began (a check's time limit counts from here)


class GrammarVerdict(msgspec.Struct, tag=True, array_like=True):
    check_id: int
    refusal: str | None  # why the compiler refuses the grammar; None: it compiled


class GrammarBusy(msgspec.Struct, tag=True, array_like=True):
    check_id: int
    retry_after: int  # seconds: the compiler's queue is full


class Failed(msgspec.Struct, tag=True, array_like=True):
    error: str


class SeqOutput(msgspec.Struct, array_like=True):
    seq_id: int
    token_ids: list[int]
    finish_reason: str | None
    logprobs: list[float] | None
    prompt_logprobs: list[float | None] | None = None


class RequestStep(msgspec.Struct, array_like=True):
    request_id: int
    seqs: list[SeqOutput]
    finished: bool
    error: str | None = None
    # On a request's first output (its decode time 0 then) and on its last step, when it finished without an error.
    timings: RequestTimings | None = None
    # On a vision-language request's last step: the prompt tokens the engine computed, each image's included (the
    # API process counts the text's only).
    prompt_tokens: int | None = None


class StepOutputs(msgspec.Struct, tag=True, array_like=True):
    requests: list[RequestStep]
    running: int
    waiting: int
    kv_cache_usage: float
    prefix_waits: int = 0  # requests held by the prefix gate since the engine started


ToEngine = AddRequest | AddGroup | CheckGrammar | Abort | Shutdown
FromEngine = Ready | Failed | StepOutputs | GrammarStarted | GrammarVerdict | GrammarBusy
