"""What crosses the engine seam: a prompt and its generation parameters in, per-step deltas out.

msgspec Structs, because the same objects travel between the API and engine processes (msgpack) and are
built on the hot path once per engine step.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

# (num_assistant_tokens, max_ngram_size): OVMS's defaults for a request to a prompt lookup model that sets neither.
PROMPT_LOOKUP_DEFAULTS = (5, 3)


class Image(msgspec.Struct, array_like=True, frozen=True):
    """RGB pixels, row by row (height × width × 3 bytes), as the engine takes them."""

    data: bytes
    height: int
    width: int


class TokenPrompt(msgspec.Struct, tag=True, array_like=True, frozen=True):
    """A prompt as token ids: what a text-only model is given."""

    token_ids: list[int]


class TextPrompt(msgspec.Struct, tag=True, array_like=True, frozen=True):
    """A vision-language model's prompt: its text, in which `<ov_genai_image_i>` tags place the images (the engine
    tokenizes it with them); `token_ids` are the text's own, what limits and admission count."""

    text: str
    token_ids: list[int]
    images: tuple[Image, ...] = ()


Prompt = TokenPrompt | TextPrompt


class StructuredOutput(msgspec.Struct, frozen=True):
    """A grammar the output must follow, as openvino_genai's StructuredOutputConfig names its kinds."""

    kind: Literal["json_schema", "regex", "grammar"]
    value: str
    param: str = "response_format"  # the request field it came from: a refusal names it
    # Its compile time as estimated before it was asked for (grammar_cost.py, in ms of one core): the engine's
    # compiler takes cheap grammars on a lane of their own and the rest cheapest first. 0: not estimated.
    cost: float = 0.0


class GenerationParams(msgspec.Struct, frozen=True):
    max_new_tokens: int
    temperature: float = 1.0
    do_sample: bool = False
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    n: int = 1
    num_beams: int = 1
    ignore_eos: bool = False
    min_new_tokens: int = 0  # no end of sequence and no stop string before this many tokens (vLLM's min_tokens)
    logprobs: int = 0
    # The prompt comes back first with each token's log probability (completions' echo + logprobs, max_tokens 0).
    echo: bool = False
    structured_output: StructuredOutput | None = None
    # Prompt lookup decoding (both 0 unless the model is served with it): candidates proposed per step, and the
    # longest n-gram of the prompt matched to find them.
    num_assistant_tokens: int = 0
    max_ngram_size: int = 0


class SequenceDelta(msgspec.Struct):
    """New output of one sequence (choice) since the last delta."""

    index: int
    text: str
    token_count: int
    finish_reason: str | None = None
    logprobs: list[float] | None = None
    token_ids: list[int] | None = None
    # With `echo`: the prompt's log probabilities (None for the first token, which has no context) before any text.
    prompt_logprobs: list[float | None] | None = None
    stop_reason: str | None = None  # the stop string the text ended at, if it did (vLLM's stop_reason)


class RequestTimings(msgspec.Struct, array_like=True, frozen=True):
    """Where a finished request's time went in the engine, in seconds (vLLM's queue, prefill and decode times):
    sent to the engine until the pipeline took it (held by the prefix gate included), taken until its first
    token (waiting in the pipeline's own scheduler included: the pipeline does not say when it first scheduled a
    request), first token until last."""

    queue: float
    prefill: float
    decode: float


class RequestOutput(msgspec.Struct):
    deltas: list[SequenceDelta]
    finished: bool
    prompt_tokens: int
    timings: RequestTimings | None = None  # on the last output of a request that finished


class EngineState(enum.StrEnum):
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"
    FAILED = "FAILED"


class EngineHealth(msgspec.Struct):
    state: EngineState
    message: str = ""

    @property
    def ready(self) -> bool:
        return self.state is EngineState.AVAILABLE


class EngineStats(msgspec.Struct):
    """What an engine reports of itself for /metrics: the last step's batch and cache, and its restarts."""

    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0
    restarts: int = 0
    prefix_waits: int = 0  # requests held by prefix-aware admission, since the server started


class EngineError(Exception):
    """The engine could not finish a request (crash, out of KV cache, rejected parameters)."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class EngineBusy(EngineError):
    """The engine cannot take this work now (its grammar compiler's queue is full): retry after `retry_after` s."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message, retryable=True)
        self.retry_after = retry_after


def engine_ends_at_stops(params: GenerationParams, prompt: Prompt) -> bool:
    """Whether the engine is told the request's stop strings. The API process finds them in the text and ends the
    request itself (engine/api_process/stop_text.py), since the engine cut a string's trailing whitespace off with the
    token after it ("\n" never showed as the string matched); but a prompt with images has its tokens counted by the
    engine only as the engine ends it, so the engine stops those. (Beam search with stop strings is refused:
    request/sampling.py.)"""
    return bool(params.stop) and isinstance(prompt, TextPrompt)
