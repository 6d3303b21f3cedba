"""A scripted model for unit tests of protocol edge cases the real engine cannot be made to produce: a fake prompt
builder and a fake runtime behind the same seam as the OpenVINO ones (engine/interface.py), checked against it by
`make lint`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from ovgenai_common.response_store import ResponseStore
from ovgenai_server.app import create_app
from ovgenai_server.engine.contract.interface import PromptBuilder, Runtime
from ovgenai_server.engine.contract.tuning import Tuning
from ovgenai_server.engine.contract.types import (
    EngineError,
    EngineHealth,
    EngineState,
    EngineStats,
    GenerationParams,
    Prompt,
    RequestOutput,
    SequenceDelta,
    StructuredOutput,
)
from ovgenai_server.metrics import ServerMetrics
from ovgenai_server.models.registry import ModelFacts, ModelRegistry, ServedModel
from ovgenai_server.request.admission import Limits
from ovgenai_server.settings import BackendSettings
from ovgenai_server.state import ServerState

NAME = "fake-model"
FACTS = ModelFacts(name=NAME, max_context=64, best_of_limit=4, max_num_seqs=256, prompt_lookup=False,
                   prefix_caching=False, vision=False, vocabulary=1000, source=f"/models/{NAME}")


class FakePrompts:
    """A template that writes `role: content` lines; a tokenizer with one token per word, its id the word's length."""

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool, variables: dict[str, Any] | None) -> str:  # noqa: ARG002
        extra = "".join(f"\n{key}={value}" for key, value in (variables or {}).items())
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + ("\ntools" if tools else "") + extra

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:  # noqa: ARG002
        return [len(word) for word in text.split()]

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:  # noqa: ARG002
        return " ".join("x" * t for t in token_ids)

    def token_strings(self, token_ids: list[int]) -> list[str]:
        return ["x" * t for t in token_ids]

    def tokenizer_config(self) -> dict[str, Any]:
        return {"bos_token": None, "eos_token": "x", "pad_token": None, "chat_template": "{{ messages }}",
                "tokenizer_class": "FakePrompts"}


class FakeRuntime:
    """Gives `pieces`, one per step, to every choice; fails at step `fail_after` when set."""

    tuning: Tuning | None = None
    kv_cache_tokens: int | None = None

    def __init__(self, pieces: list[str] | None = None, fail_after: int | None = None,
                 state: EngineState = EngineState.AVAILABLE, events: list | None = None):
        self.pieces = pieces if pieces is not None else ["Hello", ",", " world"]
        self.fail_after = fail_after
        self.state = state
        self.events = events  # "token" is appended as each step's output is handed over, to order against sends
        self.calls: list[tuple[list[int], GenerationParams]] = []
        self.active = 0
        self.stats = EngineStats()
        self.wait_per_token: float | None = None  # seconds of queue each prompt token is estimated to cost
        self.stop_reason: str | None = None  # the stop string the last piece is said to have ended at
        self.closed = False
        self.grammars_pending = 0

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self.closed = True
        self.state = EngineState.FAILED

    def health(self) -> EngineHealth:
        return EngineHealth(self.state, "" if self.state is EngineState.AVAILABLE else "Loading model")

    def in_flight(self) -> int:
        return self.active

    def grammar_checks(self) -> int:
        return self.grammars_pending

    def queue_wait(self, prompts: Sequence[Sequence[int]]) -> float | None:
        return None if self.wait_per_token is None else self.wait_per_token * sum(map(len, prompts))

    async def check_structured_output(self, structured: StructuredOutput) -> str | None:
        return "refused by the fake compiler" if "refuse" in structured.value else None

    async def generate(self, prompt: Prompt, params: GenerationParams) -> AsyncGenerator[RequestOutput, None]:
        self.calls.append((prompt.token_ids, params))
        self.active += 1
        try:
            pieces = self.pieces[: params.max_new_tokens]
            for step, piece in enumerate(pieces):
                if self.fail_after is not None and step == self.fail_after:
                    raise EngineError("The engine process stopped while generating; please retry.", retryable=True)
                last = step == len(pieces) - 1
                reason = ("length" if len(self.pieces) > params.max_new_tokens else "stop") if last else None
                stop = self.stop_reason if last else None
                deltas = [SequenceDelta(i, piece, 1, reason, [-0.5], [step + 1], stop_reason=stop)
                          for i in range(params.n)]
                if self.events is not None:
                    self.events.append("token")
                yield RequestOutput(deltas, last, len(prompt.token_ids))
        finally:
            self.active -= 1


def fake_model(runtime: FakeRuntime | None = None, tools: bool = False, **facts: Any) -> ServedModel:
    """A served fake: `tools` says whether its template renders tools; `facts` override FACTS."""
    return ServedModel(replace(FACTS, supports_tools=tools, **facts), FakePrompts(), runtime or FakeRuntime())


def _conforms(prompts: FakePrompts, runtime: FakeRuntime) -> tuple[PromptBuilder, Runtime]:
    """For the type checker (make lint): the fakes implement the seam's protocols as declared."""
    return prompts, runtime


def fake_state(*models: ServedModel, metrics: CollectorRegistry | None = None, **settings: Any) -> ServerState:
    """The backend's state around these models (a fake one by default), its metrics in `metrics` (else a registry of
    its own); `settings` are the backend's."""
    served = ModelRegistry({model.name: model for model in models or (fake_model(),)})
    chosen = BackendSettings(**settings)
    return ServerState(served, Limits.of(chosen), ServerMetrics(metrics or CollectorRegistry(), served.runtimes),
                       responses=ResponseStore(chosen.responses_store_size, chosen.responses_store_ttl))


def make_client(served: FakeRuntime | ServedModel, **settings) -> httpx.AsyncClient:
    """A client of the app serving `served` (a fake runtime is served as the fake model)."""
    model = served if isinstance(served, ServedModel) else fake_model(served)
    app = create_app(BackendSettings(**settings), [model])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def sse_payloads(text: str) -> list:
    lines = [line for line in text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines), lines
    return [line[6:] for line in lines]
