"""Only what differs from OpenAI: OPEA lets `messages` be a plain string, and `stream` defaults to true.

The body is otherwise relayed untouched, so every parameter the backend supports passes through (and the
backend, not this wrapper, names the ones it refuses).
"""

from __future__ import annotations

from typing import Any

from ovgenai_common.errors import APIError, ErrorKind


def normalize_chat_body(body: Any, default_model: str | None, accept: str) -> tuple[dict[str, Any], bool]:
    """(body for the backend, whether to stream)."""
    if not isinstance(body, dict):
        raise APIError(ErrorKind.INVALID_REQUEST, "The request body must be a JSON object.")
    messages = body.get("messages")
    if isinstance(messages, str):
        body["messages"] = [{"role": "user", "content": messages}]
    elif not isinstance(messages, list) or not messages:
        raise APIError(
            ErrorKind.INVALID_REQUEST, "'messages' must be a string or a non-empty list of messages.", "messages"
        )
    if not body.get("model"):
        if not default_model:
            raise APIError(ErrorKind.INVALID_REQUEST, "'model' is required (LLM_MODEL is not set).", "model")
        body["model"] = default_model
    stream = body.get("stream")
    if stream is None:
        stream = not wants_json_only(accept)
        body["stream"] = stream
    elif not isinstance(stream, bool):
        raise APIError(ErrorKind.INVALID_REQUEST, "'stream' must be a boolean.", "stream")
    return body, stream


def wants_json_only(accept: str) -> bool:
    """The official openai client omits `stream` and sends `Accept: application/json`: it wants one JSON body."""
    types = {part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip()}
    return "application/json" in types and "text/event-stream" not in types and "*/*" not in types
