"""A request ready for its model's engine: what the request path hands the stream runner."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from .chat_output import OutputPlan
from .engine.types import GenerationParams, Prompt, RequestOutput
from .models import ServedModel


@dataclass
class Prepared:
    """The prompt, the generation parameters and how a chat answer's text is read (chat_output.py)."""

    model: ServedModel
    prompt: Prompt
    params: GenerationParams
    output: OutputPlan = field(default_factory=OutputPlan)
    text: str | None = None  # a completion's prompt as the client sent it, when it came as text (its echo)

    @property
    def prompt_ids(self) -> list[int]:
        return self.prompt.token_ids

    def echo_text(self) -> str:
        """The prompt as a completion's echo shows it: as sent, or its token ids decoded."""
        return self.text if self.text is not None else self.model.prompts.decode(self.prompt_ids)

    def generate(self) -> AsyncGenerator[RequestOutput, None]:
        return self.model.runtime.generate(self.prompt, self.params)
