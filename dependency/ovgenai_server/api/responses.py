"""OpenAI's Responses API on the chat path: a request read as a chat completion (its instructions, the conversation
of `previous_response_id`, its input, tools and text format: ovgenai_common.responses_protocol), prepared and run as
one, and its answer given back as output items, whole or as the Responses events (ovgenai_common.response_output).
A finished response is stored, with its conversation, when `store` asks (ovgenai_common.response_store)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ovgenai_common.errors import ErrorKind, invalid
from ovgenai_common.response_output import ResponseEvents, event_frame, message_parts, response_of
from ovgenai_common.responses_protocol import ResponsesRequest, chat_body, chat_messages, output_messages

from ..engine.contract.types import SequenceDelta
from ..output.stream_runner import stream
from ..request.prepared import Prepared
from ..state import ServerState
from ..tools.chat_output import ChoiceOutput, final_reason, streamed_parts
from . import chat
from .protocol import ChatCompletionRequest


@dataclass
class Turn:
    """A Responses request prepared as a chat completion, with what its stored conversation starts from."""

    request: ResponsesRequest
    chat: ChatCompletionRequest
    prep: Prepared
    conversation: list[dict[str, Any]]  # the earlier turns and this input, as chat messages (no instructions)
    client: str


def chat_request(request: ResponsesRequest, earlier: list[dict[str, Any]]) -> ChatCompletionRequest:
    try:
        return ChatCompletionRequest.model_validate(chat_body(request, earlier))
    except ValidationError as error:  # a conversation chat completions refuse (e.g. a tool result with no text)
        first = error.errors()[0]
        raise invalid(f"The input is not a conversation this server can answer: {first['msg']}.", "input") from error


async def prepare(state: ServerState, request: ResponsesRequest, client: str = "") -> Turn:
    request.refuse_unknown_fields()
    earlier = state.responses.history(request.previous_response_id)
    body = chat_request(request, earlier)
    prep = await chat.prepare(state, body, client)
    conversation = earlier + chat_messages(request.input)
    return Turn(request, body, prep, conversation, client)


def store(state: ServerState, turn: Turn, response: dict[str, Any]) -> None:
    if turn.request.store and response["status"] != "failed":
        state.responses.put(turn.client, response, turn.conversation + output_messages(response["output"]))


async def answer(state: ServerState, turn: Turn) -> dict[str, Any]:
    """The whole response: the chat answer's message as output items."""
    completion = await chat.answer(turn.chat, turn.prep, state.metrics)
    choice = completion["choices"][0]
    events = ResponseEvents(response_of(turn.request, turn.prep.model.name))
    for part in message_parts(choice["message"]):
        events.feed(part)
    events.finish(completion["usage"], choice["finish_reason"])
    store(state, turn, events.response)
    return events.response


def streamed(state: ServerState, turn: Turn) -> AsyncGenerator[bytes, None]:
    return _streamed(state, turn, ResponsesStream(state, turn))


async def _streamed(state: ServerState, turn: Turn, writer: ResponsesStream) -> AsyncGenerator[bytes, None]:
    for frame in writer.started():
        yield frame
    async for frame in stream(turn.prep, state.metrics, writer):
        yield frame


class ResponsesStream:
    """A response as the Responses API's events: the chat answer's parts (tools/chat_output.py) become its items."""

    def __init__(self, state: ServerState, turn: Turn):
        self.state, self.turn = state, turn
        self.events = ResponseEvents(response_of(turn.request, turn.prep.model.name))
        self.rid = self.events.response["id"]
        self.reader: ChoiceOutput | None = turn.prep.output.choice() if turn.prep.output.active else None
        self.finish_reason = "stop"

    def started(self) -> list[bytes]:
        return [event_frame(event) for event in self.events.started()]

    def delta(self, delta: SequenceDelta) -> list[bytes]:
        parts = streamed_parts(self.reader, delta)
        if delta.finish_reason is not None:
            self.finish_reason = final_reason(self.reader, delta.finish_reason)
        return [event_frame(event) for part in parts for event in self.events.feed(part)]

    def end(self, counted: dict[str, int]) -> list[bytes]:
        frames = [event_frame(event) for event in self.events.finish(counted, self.finish_reason)]
        store(self.state, self.turn, self.events.response)
        return frames

    def error(self, message: str, kind: ErrorKind) -> list[bytes]:
        return [event_frame(event) for event in self.events.fail(message, kind)]
