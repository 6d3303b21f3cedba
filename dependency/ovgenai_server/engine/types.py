"""What crosses the engine seam: generation parameters in, per-step deltas out.

msgspec Structs, because the same objects travel between the API and engine processes (msgpack) and are
built on the hot path once per engine step.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..images import Image
    from ..tool_calls import ToolFormat
    from .autotune import Tuning


# (num_assistant_tokens, max_ngram_size): OVMS's defaults for a request to a prompt lookup model that sets neither.
PROMPT_LOOKUP_DEFAULTS = (5, 3)


class StructuredOutput(msgspec.Struct, frozen=True):
    """A grammar the output must follow, as openvino_genai's StructuredOutputConfig names its kinds."""

    kind: Literal["json_schema", "regex", "grammar"]
    value: str
    param: str = "response_format"  # the request field it came from: a refusal names it


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


class ModelInfo(msgspec.Struct, frozen=True):
    """Where a served model comes from, for management APIs (TorchServe's describe, its model-config.yaml)."""

    source: str  # the IR folder or .gguf file it was loaded from
    folder: Path | None  # the folder holding the model's files and configuration, when it has one
    device: str


class EngineError(Exception):
    """The engine could not finish a request (crash, out of KV cache, rejected parameters)."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class Engine(Protocol):
    """What the HTTP layer needs from an engine; implemented by `OpenVINOEngine` and by tests' fakes."""

    name: str
    max_context: int
    tokenizer_limit: int | None  # the tokenizer cuts texts to this many tokens (ovgenai_common/tokens.py)
    kv_cache_tokens: int | None  # what the KV cache holds, all sequences together; None: it grows by itself
    vocabulary: int | None  # token ids a client may send: 0 .. vocabulary - 1
    best_of_limit: int
    max_num_seqs: int  # this model's own batch size (graph.pbtxt may set it per model): admission is sized on it
    prompt_lookup: bool  # served with prompt lookup decoding: every request needs its parameters
    prefix_caching: bool  # a prompt prefix found in the cache is not computed again (so has no log probabilities)
    vision: bool  # a vision-language model: chat messages may carry images
    tool_parser: ToolFormat  # the format the model writes tool calls in (tool_calls.py)
    reasoning_parser: str | None  # the model's reasoning is split from its answer (reasoning.py)
    model: ModelInfo
    stats: EngineStats  # read by /metrics when scraped; the engine keeps it current
    tuning: Tuning | None  # what autotune chose and measured on this CPU, once the engine is ready (else None)

    def health(self) -> EngineHealth: ...

    def apply_chat_template(
        self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True,
        extra_context: dict[str, Any] | None = None,
    ) -> str: ...

    def supports_tools(self) -> bool: ...

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str: ...

    def token_strings(self, token_ids: list[int]) -> list[str]:
        """Each id's entry in the vocabulary, its bytes as UTF-8 text (vLLM's `token_strs`)."""
        ...

    def in_flight(self) -> int: ...

    def queue_wait(self, prompts: Sequence[Sequence[int]]) -> float | None:
        """Seconds until the last of these prompts would have its first token were they admitted now, estimated
        (engine/backlog.py); None when the engine's prompt rate is not known."""
        ...

    async def check_structured_output(self, structured: StructuredOutput) -> str | None:
        """None when the engine can run this grammar; otherwise why not (checked before admission: a grammar the
        engine's compiler refuses must never reach the engine)."""
        ...

    def generate(
        self, prompt_ids: list[int], params: GenerationParams, prompt_text: str = "", images: Sequence[Image] = ()
    ) -> AsyncGenerator[RequestOutput, None]:
        """The request's outputs. A vision-language model (`vision`) also takes the prompt's text, in which
        `<ov_genai_image_i>` tags place `images`."""
        ...
