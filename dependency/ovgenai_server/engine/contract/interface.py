"""The engine seam, as the request path sees each served model: a prompt builder (its chat template and tokenizer) and a
runtime (load, generate, health, stats). The model's facts (limits, vision, parsers) are the third part, one object
resolved once per model (models/registry.py). Both the OpenVINO engine and the tests' fake are type-checked against
these protocols (`make lint`), so another engine is a drop-in."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, Protocol

from .tuning import Tuning
from .types import EngineHealth, EngineStats, GenerationParams, Prompt, RequestOutput, StructuredOutput


class PromptBuilder(Protocol):
    """The model's chat template and tokenizer: a conversation to text, text to token ids and back."""

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool, variables: dict[str, Any] | None) -> str: ...

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str: ...

    def token_strings(self, token_ids: list[int]) -> list[str]:
        """Each id's entry in the vocabulary, its bytes as UTF-8 text (vLLM's `token_strs`)."""
        ...

    def tokenizer_config(self) -> dict[str, Any]:
        """The tokenizer as Hugging Face's tokenizer_config.json names it (vLLM's /tokenizer_info): `bos_token`,
        `eos_token` and `pad_token` (None where it has none), `chat_template` (the template it renders with; None
        without one of the model's own) and `tokenizer_class`."""
        ...


class Runtime(Protocol):
    """Where a model's requests run."""

    stats: EngineStats  # read by /metrics when scraped; the runtime keeps it current
    tuning: Tuning | None  # what autotune chose and measured on this CPU, once ready (else None)
    kv_cache_tokens: int | None  # what the KV cache holds, all sequences together, once ready; None: it grows

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def health(self) -> EngineHealth: ...

    def in_flight(self) -> int: ...

    def grammar_checks(self) -> int:
        """Requests waiting for their grammar's compile before they are admitted (not yet in flight)."""
        ...

    def queue_wait(self, prompts: Sequence[Sequence[int]]) -> float | None:
        """Seconds until the last of these prompts would have its first token were they admitted now, estimated
        (engine/api_process/backlog.py); None when the engine's prompt rate is not known."""
        ...

    async def check_structured_output(self, structured: StructuredOutput) -> str | None:
        """None when the engine can run this grammar; otherwise why not (checked before admission: a grammar the
        engine's compiler refuses must never reach the engine)."""
        ...

    def generate(self, prompt: Prompt, params: GenerationParams) -> AsyncGenerator[RequestOutput, None]: ...
