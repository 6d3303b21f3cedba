"""A scripted engine for unit tests of protocol edge cases the real engine cannot be made to produce."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ovgenai_server.engine.autotune import Tuning
from ovgenai_server.engine.types import (
    Engine,
    EngineError,
    EngineHealth,
    EngineState,
    EngineStats,
    GenerationParams,
    ModelInfo,
    RequestOutput,
    SequenceDelta,
    StructuredOutput,
)
from ovgenai_server.images import Image
from ovgenai_server.tool_calls import ToolFormat


class FakeEngine:
    name = "fake-model"
    max_context = 64
    tokenizer_limit: int | None = None
    kv_cache_tokens: int | None = None
    best_of_limit = 4
    max_num_seqs = 256
    prompt_lookup = False
    prefix_caching = False
    vocabulary: int | None = 1000
    tool_parser: ToolFormat = "auto"
    reasoning_parser: str | None = None
    vision = False
    tuning: Tuning | None = None
    wait_per_token: float | None = None  # seconds of queue each prompt token is estimated to cost; None: unknown

    def __init__(self, pieces: list[str] | None = None, fail_after: int | None = None, tools: bool = False,
                 state: EngineState = EngineState.AVAILABLE, events: list | None = None):
        self.pieces = pieces if pieces is not None else ["Hello", ",", " world"]
        self.fail_after = fail_after
        self.tools = tools
        self.state = state
        self.events = events  # "token" is appended as each step's output is handed over, to order against sends
        self.calls: list[tuple[list[int], GenerationParams]] = []
        self.active = 0
        self.model = ModelInfo(source=f"/models/{self.name}", folder=None, device="CPU")
        self.stats = EngineStats()

    def health(self) -> EngineHealth:
        return EngineHealth(self.state, "" if self.state is EngineState.AVAILABLE else "Loading model")

    def apply_chat_template(
        self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True,  # noqa: ARG002
        extra_context: dict[str, Any] | None = None,
    ) -> str:
        variables = "".join(f"\n{key}={value}" for key, value in (extra_context or {}).items())
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + ("\ntools" if tools else "") + variables

    def supports_tools(self) -> bool:
        return self.tools

    async def check_structured_output(self, structured: StructuredOutput) -> str | None:
        return "refused by the fake compiler" if "refuse" in structured.value else None

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:  # noqa: ARG002
        return [len(word) for word in text.split()]

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:  # noqa: ARG002
        return " ".join("x" * t for t in token_ids)

    def token_strings(self, token_ids: list[int]) -> list[str]:
        return ["x" * t for t in token_ids]

    def in_flight(self) -> int:
        return self.active

    def queue_wait(self, prompts: Sequence[Sequence[int]]) -> float | None:
        return None if self.wait_per_token is None else self.wait_per_token * sum(map(len, prompts))

    async def generate(
        self, prompt_ids: list[int], params: GenerationParams, prompt_text: str = "",  # noqa: ARG002
        images: Sequence[Image] = (),  # noqa: ARG002
    ) -> AsyncGenerator[RequestOutput, None]:
        self.calls.append((prompt_ids, params))
        self.active += 1
        try:
            pieces = self.pieces[: params.max_new_tokens]
            for step, piece in enumerate(pieces):
                if self.fail_after is not None and step == self.fail_after:
                    raise EngineError("The engine process stopped while generating; please retry.", retryable=True)
                last = step == len(pieces) - 1
                reason = ("length" if len(self.pieces) > params.max_new_tokens else "stop") if last else None
                deltas = [SequenceDelta(i, piece, 1, reason, [-0.5], [step + 1]) for i in range(params.n)]
                if self.events is not None:
                    self.events.append("token")
                yield RequestOutput(deltas, last, len(prompt_ids))
        finally:
            self.active -= 1


def _conforms(engine: FakeEngine) -> Engine:
    """For the type checker (make lint): the fake implements the Engine protocol as declared."""
    return engine
