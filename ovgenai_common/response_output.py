"""A response's output items (reasoning, message, function calls) built from a chat answer's parts, and, as it
streams, the Responses API's events for them. Whole and streamed responses are built by the same `ResponseEvents`, so
they always agree.

A part is a chat stream's delta: `{"reasoning_content": ...}`, `{"content": ...}` or `{"tool_calls": [...]}`. A change
of kind closes the open item and opens the next, as OpenAI's stream does: added, deltas, done."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

from .errors import ErrorKind
from .responses_protocol import NamedFunction, ResponsesRequest
from .sse import dumps

# What a chat finish reason makes of a response: its status, and why it is incomplete.
_INCOMPLETE = {"length": "max_output_tokens"}
# The Responses API's error codes for a response that failed once it had started.
_FAILED_CODES = {ErrorKind.UNAVAILABLE: "server_error", ErrorKind.INVALID_REQUEST: "invalid_prompt"}


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def response_of(request: ResponsesRequest, model: str) -> dict[str, Any]:
    """The response object as it starts: in progress, no output yet, the request's settings echoed."""
    tool_choice: Any = request.tool_choice or "auto"
    if isinstance(tool_choice, NamedFunction):
        tool_choice = tool_choice.model_dump()
    text = request.text.model_dump(by_alias=True, exclude_none=True) if request.text is not None else {}
    return {
        "id": new_id("resp"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
        "background": False, "error": None, "incomplete_details": None, "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens, "model": model, "output": [],
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": request.previous_response_id,
        "reasoning": request.reasoning.model_dump() if request.reasoning else {"effort": None, "summary": None},
        "store": request.store, "temperature": request.temperature, "text": {"format": {"type": "text"}, **text},
        "tool_choice": tool_choice, "tools": [tool.model_dump(exclude_none=True) for tool in request.tools or ()],
        "top_p": request.top_p, "truncation": "disabled", "usage": None, "user": None,
        "metadata": request.metadata or {},
    }


def response_usage(counted: dict[str, int]) -> dict[str, Any]:
    """A chat usage (prompt and completion tokens) as the Responses API counts it. Its details are required by
    OpenAI's schema (the Agents SDK builds its usage from them), so they stay although the engine measures neither
    cached nor reasoning tokens; Anthropic's optional cache counts are left out (api/anthropic_messages.py)."""
    return {"input_tokens": counted["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": counted["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": counted["prompt_tokens"] + counted["completion_tokens"]}


def message_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole chat message as the parts a stream would have given."""
    parts: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        parts.append({"reasoning_content": message["reasoning_content"]})
    if message.get("content"):
        parts.append({"content": message["content"]})
    calls = message.get("tool_calls") or []
    parts += [{"tool_calls": [{**call, "index": index}]} for index, call in enumerate(calls)]
    return parts


class ResponseEvents:
    """`feed` a response's parts as they come, then `finish` (or `fail`) it; each gives the events to stream. The
    response itself (`.response`) is complete once finished."""

    def __init__(self, response: dict[str, Any]):
        self.response = response
        self.output: list[dict[str, Any]] = response["output"]
        self._sequence = 0
        self._open: dict[str, Any] | None = None  # the item being written
        self._call_index: int | None = None  # the chat tool call index the open function call item is

    def started(self) -> list[dict[str, Any]]:
        snapshot = copy.deepcopy(self.response)
        return [self._event("response.created", response=snapshot),
                self._event("response.in_progress", response=snapshot)]

    def feed(self, part: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if part.get("reasoning_content"):
            events += self._write("reasoning", part["reasoning_content"])
        if part.get("content"):
            events += self._write("message", part["content"])
        for piece in part.get("tool_calls") or ():
            if self._call_index != piece["index"]:
                events += self._close()
                events += self._open_item(_function_call(piece))
                self._call_index = piece["index"]
            delta = piece.get("function", {}).get("arguments", "")
            if delta:
                assert self._open is not None
                self._open["arguments"] += delta
                events.append(self._event("response.function_call_arguments.delta", item_id=self._open["id"],
                                          output_index=len(self.output) - 1, delta=delta))
        return events

    def finish(self, counted: dict[str, int], finish_reason: str,
               annotations: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The response ended: `completed`, or `incomplete` where the chat answer was cut by its length. Annotations
        (the gateway's sources) go on the answer's text."""
        incomplete = _INCOMPLETE.get(finish_reason)
        if annotations and self._open is not None and self._open["type"] == "message":
            self._open["content"][0]["annotations"] = annotations
        events = self._close("incomplete" if incomplete else "completed")
        self.response.update(status="incomplete" if incomplete else "completed", usage=response_usage(counted),
                             incomplete_details={"reason": incomplete} if incomplete else None,
                             completed_at=int(time.time()))
        return [*events, self._event(f"response.{self.response['status']}", response=self.response)]

    def fail(self, message: str, kind: ErrorKind) -> list[dict[str, Any]]:
        """The response failed after it started: the open item is left incomplete, the error said in the response."""
        events = self._close("incomplete")
        self.response.update(status="failed", error={"code": _FAILED_CODES.get(kind, "server_error"),
                                                     "message": message})
        return [*events, self._event("response.failed", response=self.response)]

    def _write(self, kind: str, text: str) -> list[dict[str, Any]]:
        events = []
        if self._open is None or self._open["type"] != kind:
            events += self._close()
            events += self._open_item(_reasoning() if kind == "reasoning" else _message())
        assert self._open is not None
        content = self._open["content"][0]
        content["text"] += text
        name = "response.reasoning_text.delta" if kind == "reasoning" else "response.output_text.delta"
        extra = {} if kind == "reasoning" else {"logprobs": []}
        events.append(self._event(name, item_id=self._open["id"], output_index=len(self.output) - 1, content_index=0,
                                  delta=text, **extra))
        return events

    def _open_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        self._open = item
        self.output.append(item)
        index = len(self.output) - 1
        shown = {**item, "content": []} if "content" in item else dict(item)
        events = [self._event("response.output_item.added", output_index=index, item=shown)]
        if "content" in item:
            events.append(self._event("response.content_part.added", item_id=item["id"], output_index=index,
                                      content_index=0, part={**item["content"][0], "text": ""}))
        return events

    def _close(self, status: str = "completed") -> list[dict[str, Any]]:
        item, self._open, self._call_index = self._open, None, None
        if item is None:
            return []
        index = len(self.output) - 1
        events = []
        if item["type"] == "function_call":
            events.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                      output_index=index, name=item["name"], arguments=item["arguments"]))
        else:
            part = item["content"][0]
            name = "response.reasoning_text.done" if item["type"] == "reasoning" else "response.output_text.done"
            extra = {} if item["type"] == "reasoning" else {"logprobs": []}
            events += [self._event(name, item_id=item["id"], output_index=index, content_index=0, text=part["text"],
                                   **extra),
                       self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                   content_index=0, part=part)]
        item["status"] = status
        return [*events, self._event("response.output_item.done", output_index=index, item=item)]

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self._sequence += 1
        return {"type": kind, "sequence_number": self._sequence - 1, **fields}


def _message() -> dict[str, Any]:
    return {"id": new_id("msg"), "type": "message", "status": "in_progress", "role": "assistant",
            "content": [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}]}


def _reasoning() -> dict[str, Any]:
    return {"id": new_id("rs"), "type": "reasoning", "status": "in_progress", "summary": [],
            "content": [{"type": "reasoning_text", "text": ""}]}


def _function_call(piece: dict[str, Any]) -> dict[str, Any]:
    return {"id": new_id("fc"), "type": "function_call", "status": "in_progress",
            "call_id": piece.get("id") or new_id("call"), "name": piece.get("function", {}).get("name", ""),
            "arguments": ""}


def event_frame(event: dict[str, Any]) -> bytes:
    """One event as the Responses API streams it: its type as the SSE event name, then its data."""
    return b"event: " + event["type"].encode() + b"\ndata: " + dumps(event) + b"\n\n"
