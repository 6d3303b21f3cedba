"""A request ready for its model's engine: what the request path hands the stream runner."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from ..engine.contract.types import GenerationParams, Prompt, RequestOutput
from ..models.registry import ServedModel
from ..tools.chat_output import OutputPlan
from .fair_share import Ticket


@dataclass
class Prepared:
    """The prompt, the generation parameters and how a chat answer's text is read (tools/chat_output.py)."""

    model: ServedModel
    prompt: Prompt
    params: GenerationParams
    output: OutputPlan = field(default_factory=OutputPlan)
    text: str | None = None  # a completion's prompt as the client sent it, when it came as text (its echo)
    # once admitted: its places (request/fair_share.py), taken in turns with other clients'
    ticket: Ticket | None = None

    @property
    def admitted(self) -> Ticket:
        if self.ticket is None:
            raise RuntimeError("a request runs only once admitted (request/admission.py)")
        return self.ticket

    @property
    def places(self) -> int:
        """The sequences it asks the engine for: its sampled choices, or a beam search's beams."""
        return max(self.params.n, self.params.num_beams)

    @property
    def engine_requests(self) -> int:
        """The requests the engine runs it as: a beam search's beams are one group; n sampled choices are n requests
        of one sequence (engine/api_process/runtime.py)."""
        return 1 if self.params.num_beams > 1 else self.params.n

    @property
    def prompt_ids(self) -> list[int]:
        return self.prompt.token_ids

    def echo_text(self) -> str:
        """The prompt as a completion's echo shows it: as sent, or its token ids decoded."""
        return self.text if self.text is not None else self.model.prompts.decode(self.prompt_ids)

    async def generate(self) -> AsyncGenerator[RequestOutput, None]:
        """The engine's outputs, once the request's turn has come (request/fair_share.py)."""
        ticket = self.admitted
        async with ticket.share.turn(ticket, self.places, self.prompt_ids, self.engine_requests):
            async with contextlib.aclosing(self.model.runtime.generate(self.prompt, self.params)) as outputs:
                async for output in outputs:
                    yield output
