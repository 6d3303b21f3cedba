"""Anthropic's Messages API on the chat path: a request read as a chat completion (api/anthropic_protocol.py), prepared
and run as one, its answer given back as content blocks (thinking, text, tool_use), whole or as Anthropic's stream
events (message_start, content_block_start/delta/stop, message_delta, message_stop). A chat answer's parts
(tools/chat_output.py) become the blocks, so both forms agree."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ovgenai_common.errors import ErrorKind, invalid
from ovgenai_common.response_output import message_parts
from ovgenai_common.sse import dumps

from ..engine.contract.types import SequenceDelta
from ..output.stream_runner import stream
from ..request.prepared import Prepared
from ..state import ServerState
from ..tools.chat_output import ChoiceOutput, final_reason, streamed_parts
from . import chat
from .anthropic_protocol import CountTokensRequest, MessagesRequest, chat_body
from .protocol import ChatCompletionRequest

# A chat finish reason as Anthropic's stop_reason.
_STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use"}
# Mid-stream failures as Anthropic's error types.
_ERROR_TYPES = {ErrorKind.UNAVAILABLE: "overloaded_error", ErrorKind.INVALID_REQUEST: "invalid_request_error"}


def chat_request(request: CountTokensRequest) -> ChatCompletionRequest:
    request.refuse_unknown_fields()
    try:
        return ChatCompletionRequest.model_validate(chat_body(request))
    except ValidationError as error:  # a conversation chat completions refuse (e.g. an empty one)
        first = error.errors()[0]
        raise invalid(f"The messages are not a conversation this server can answer: {first['msg']}.",
                      "messages") from error


async def count_tokens(state: ServerState, request: CountTokensRequest) -> dict[str, int]:
    """The prompt's tokens as the model would read it (its template, the tools described), without running it."""
    prep = await asyncio.to_thread(chat.build, state, chat_request(request))
    return {"input_tokens": len(prep.prompt_ids)}


@dataclass
class Turn:
    request: MessagesRequest
    chat: ChatCompletionRequest
    prep: Prepared


async def prepare(state: ServerState, request: MessagesRequest, client: str = "") -> Turn:
    body = chat_request(request)
    return Turn(request, body, await chat.prepare(state, body, client))


def stop_reason(finish: str, matched: str | None, called: bool = False) -> str:
    """Anthropic's stop_reason: "tool_use" whenever the answer ends in a tool call, a forced one included (chat says
    "stop" for a call tool_choice forced, as OpenAI does; a client looping on tool_use must run it)."""
    if finish == "stop" and matched is not None:
        return "stop_sequence"
    if called and finish != "length":
        return "tool_use"
    return _STOP_REASONS.get(finish, "end_turn")


async def answer(state: ServerState, turn: Turn) -> dict[str, Any]:
    """The whole message: the chat answer's message as content blocks."""
    completion = await chat.answer(turn.chat, turn.prep, state.metrics)
    choice, counted = completion["choices"][0], completion["usage"]
    blocks = Blocks(turn.prep)
    for part in message_parts(choice["message"]):
        blocks.feed(part)
    blocks.close()
    message = blocks.message(counted["prompt_tokens"])
    message.update(stop_reason=stop_reason(choice["finish_reason"], choice["stop_reason"], blocks.called),
                   stop_sequence=choice["stop_reason"],
                   usage=_usage(counted["prompt_tokens"], counted["completion_tokens"]))
    return message


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    # No cache_creation_input_tokens or cache_read_input_tokens: the engine does not say how much of a prompt its
    # prefix cache held, and a 0 would say that nothing was.
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


class Blocks:
    """A message's content blocks, built from a chat answer's parts; each change gives the stream events for it."""

    def __init__(self, prep: Prepared):
        self.id = f"msg_{uuid.uuid4().hex}"
        self.model = prep.model.name
        self.content: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._call: int | None = None  # the chat tool call index of the open tool_use block
        self._json = ""  # the open tool_use block's arguments as they came

    @property
    def called(self) -> bool:
        """The answer holds a tool call."""
        return any(block["type"] == "tool_use" for block in self.content)

    def message(self, input_tokens: int) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": self.content,
                "stop_reason": None, "stop_sequence": None, "usage": _usage(input_tokens, 0)}

    def feed(self, part: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if part.get("reasoning_content"):
            events += self._write("thinking", part["reasoning_content"])
        if part.get("content"):
            events += self._write("text", part["content"])
        for piece in part.get("tool_calls") or ():
            if self._call != piece["index"]:
                events += self.close()
                events += self._start({"type": "tool_use", "id": piece.get("id") or f"toolu_{uuid.uuid4().hex}",
                                       "name": piece["function"].get("name", ""), "input": {}})
                self._call = piece["index"]
            arguments = piece["function"].get("arguments", "")
            if arguments:
                self._json += arguments
                events.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return events

    def close(self) -> list[dict[str, Any]]:
        block, self._open, self._call = self._open, None, None
        if block is None:
            return []
        if block["type"] == "tool_use":
            block["input"] = json.loads(self._json or "{}")
            self._json = ""
        return [{"type": "content_block_stop", "index": len(self.content) - 1}]

    def _write(self, kind: str, text: str) -> list[dict[str, Any]]:
        events = []
        if self._open is None or self._open["type"] != kind:
            events += self.close()
            events += self._start({"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking"
                                  else {"type": "text", "text": ""})
        assert self._open is not None
        self._open[kind] += text
        events.append(self._delta({"type": f"{kind}_delta", kind: text}))
        return events

    def _start(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        self._open = block
        self.content.append(block)
        return [{"type": "content_block_start", "index": len(self.content) - 1, "content_block": dict(block)}]

    def _delta(self, delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": len(self.content) - 1, "delta": delta}


def _frame(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + dumps(event) + b"\n\n"


def streamed(state: ServerState, turn: Turn) -> AsyncGenerator[bytes, None]:
    return _streamed(state, turn, MessagesStream(turn))


async def _streamed(state: ServerState, turn: Turn, writer: MessagesStream) -> AsyncGenerator[bytes, None]:
    yield _frame({"type": "message_start", "message": writer.blocks.message(len(turn.prep.prompt_ids))})
    async for frame in stream(turn.prep, state.metrics, writer):
        yield frame


class MessagesStream:
    """A message as Anthropic's stream events (the stream runner's writer)."""

    def __init__(self, turn: Turn):
        self.blocks = Blocks(turn.prep)
        self.rid = self.blocks.id
        self.reader: ChoiceOutput | None = turn.prep.output.choice() if turn.prep.output.active else None
        self.finish = "stop"
        self.matched: str | None = None  # the stop sequence the text ended at

    def delta(self, delta: SequenceDelta) -> list[bytes]:
        parts = streamed_parts(self.reader, delta)
        self.matched = delta.stop_reason or self.matched
        if delta.finish_reason is not None:
            self.finish = final_reason(self.reader, delta.finish_reason)
        return [_frame(event) for part in parts for event in self.blocks.feed(part)]

    def end(self, counted: dict[str, int]) -> list[bytes]:
        reason = stop_reason(self.finish, self.matched, self.blocks.called)
        return [*(_frame(event) for event in self.blocks.close()),
                _frame({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": self.matched},
                        "usage": {"output_tokens": counted["completion_tokens"]}}),
                _frame({"type": "message_stop"})]

    def error(self, message: str, kind: ErrorKind) -> list[bytes]:
        return [_frame({"type": "error", "error": {"type": _ERROR_TYPES.get(kind, "api_error"), "message": message}})]
