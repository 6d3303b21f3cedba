"""A chat choice's generated text as OpenAI's message parts: reasoning (`reasoning_content`), answer (`content`) and
tool calls (`tool_calls`), piece by piece as it streams. A unary answer is the same pieces joined, so streamed and
unary answers always agree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..engine.contract.types import SequenceDelta
from .calls import CallDelta, ForcedCalls, Text, ToolCallParser, ToolFormat
from .described import DescribedCalls
from .reasoning import ReasoningSplitter


@dataclass(frozen=True)
class OutputPlan:
    """How a request's output is read, fixed when it is prepared."""

    tool_format: ToolFormat | None = None  # tools offered with tool_choice "auto": calls written in this format
    forced: bool = False  # tool_choice "required" or a named function: the output is a call by grammar
    function: str | None = None  # the function tool_choice named
    parallel: bool = True  # parallel_tool_calls
    reasoning: bool = False  # the model is served with a reasoning parser
    inside: bool = False  # the chat template opened the reasoning in the prompt
    described: bool = False  # tools described to a template without tool syntax, "auto": JSON calls or response

    @property
    def active(self) -> bool:
        """Whether the text needs reading at all (a plain answer streams as it comes)."""
        return self.tool_format is not None or self.forced or self.reasoning or self.described

    def choice(self) -> ChoiceOutput:
        return ChoiceOutput(self)


class ChoiceOutput:
    """One choice: `feed` each generated piece and `finish` at its end; both give stream deltas (without the role)."""

    def __init__(self, plan: OutputPlan):
        self.plan = plan
        self._reasoning = ReasoningSplitter(plan.inside) if plan.reasoning else None
        self._calls: ToolCallParser | ForcedCalls | DescribedCalls | None = None
        if plan.forced:
            self._calls = ForcedCalls(plan.function)
        elif plan.described:
            self._calls = DescribedCalls()
        elif plan.tool_format is not None:
            self._calls = ToolCallParser(plan.tool_format, plan.parallel)

    @property
    def called(self) -> bool:
        return bool(self._calls and self._calls.calls)

    def feed(self, piece: str) -> list[dict[str, Any]]:
        reasoning, answer = self._reasoning.feed(piece) if self._reasoning else ("", piece)
        return self._deltas(reasoning, self._calls.feed(answer) if self._calls and answer else [Text(answer)])

    def finish(self) -> list[dict[str, Any]]:
        reasoning, answer = self._reasoning.finish() if self._reasoning else ("", "")
        events = []
        if self._calls:
            events = (self._calls.feed(answer) if answer else []) + self._calls.finish()
        elif answer:
            events = [Text(answer)]
        return self._deltas(reasoning, events)

    def finish_reason(self, engine_reason: str) -> str:
        """OpenAI's: "tool_calls" when the model chose to call (a named function forced is a plain "stop")."""
        if engine_reason == "stop" and self.called and self.plan.function is None:
            return "tool_calls"
        return engine_reason

    @staticmethod
    def _deltas(reasoning: str, events: list[Text | CallDelta]) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = [{"reasoning_content": reasoning}] if reasoning else []
        for event in events:
            if isinstance(event, Text):
                if event.text:
                    deltas.append({"content": event.text})
            else:
                deltas.append({"tool_calls": [event.as_delta()]})
        return deltas

    def message(self, deltas: list[dict[str, Any]]) -> dict[str, Any]:
        """The unary message these deltas (all of the choice's) make."""
        content = "".join(delta.get("content", "") for delta in deltas)
        calls: dict[int, dict[str, Any]] = {}
        for delta in deltas:
            for piece in delta.get("tool_calls", ()):
                call = calls.setdefault(piece["index"], {"id": piece.get("id"), "type": "function",
                                                         "function": {"name": "", "arguments": ""}})
                call["function"]["name"] += piece["function"].get("name", "")
                call["function"]["arguments"] += piece["function"]["arguments"]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.plan.reasoning:
            reasoned = self._reasoning is not None and self._reasoning.reasoned
            message["reasoning_content"] = "".join(d.get("reasoning_content", "") for d in deltas) if reasoned else None
        if calls:
            message["content"] = content.strip() or None
            message["tool_calls"] = [calls[index] for index in sorted(calls)]
        return message


def streamed_parts(reader: ChoiceOutput | None, delta: SequenceDelta) -> list[dict[str, Any]]:
    """A streamed delta as chat's delta parts: read by the choice's reader where its output is parsed (reasoning,
    tool calls; `None`: a plain answer), the reader's remainder with the delta that ends the choice."""
    if reader is None:
        return [{"content": delta.text}] if delta.text else []
    parts = reader.feed(delta.text) if delta.text else []
    return parts + reader.finish() if delta.finish_reason is not None else parts


def final_reason(reader: ChoiceOutput | None, engine_reason: str) -> str:
    """The finish reason a client is given: the reader's ("tool_calls"), else the engine's."""
    return reader.finish_reason(engine_reason) if reader is not None else engine_reason
