"""IPC messages between the API process and the engine process (msgpack over ZeroMQ).

One `StepOutputs` message per engine step carries every request's new token ids, so IPC cost scales with steps,
not with tokens × requests.
"""

from __future__ import annotations

import msgspec

from .types import GenerationParams


class AddRequest(msgspec.Struct, tag=True, array_like=True):
    request_id: int
    prompt_ids: list[int]
    params: GenerationParams


class Abort(msgspec.Struct, tag=True, array_like=True):
    request_id: int


class Shutdown(msgspec.Struct, tag=True, array_like=True):
    pass


class Ready(msgspec.Struct, tag=True, array_like=True):
    max_context: int
    eos_token_ids: list[int]


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


class StepOutputs(msgspec.Struct, tag=True, array_like=True):
    requests: list[RequestStep]
    running: int
    waiting: int
    kv_cache_usage: float
    prefix_waits: int = 0  # requests held by the prefix gate since the engine started


ToEngine = AddRequest | Abort | Shutdown
FromEngine = Ready | Failed | StepOutputs
