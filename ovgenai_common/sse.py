"""Server-sent events as OpenAI streams them: `data: {json}\\n\\n` frames, an error event, then `data: [DONE]`.

Frames are built once as bytes (msgspec encodes these small dicts several times faster than json.dumps) and
handed to sse-starlette, which writes bytes through untouched; it owns the headers, keep-alive pings and
disconnect detection. A client disconnect cancels the frame iterator, so its `finally` blocks run: that is where
generation is aborted.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from sse_starlette.sse import EventSourceResponse

from .errors import APIError, ErrorKind, error_body

logger = logging.getLogger(__name__)

DONE_FRAME = b"data: [DONE]\n\n"
# One server-sent event: before OpenAPI 3.2 (FastAPI writes 3.1), a text/event-stream `schema` describes each event
# (its fields), not the stream as one string.
SSE_EVENT_SCHEMA = {"type": "object", "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
                    "required": ["data"]}
# What an endpoint that answers `stream: true` with server-sent events says in its OpenAPI document.
STREAMING_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer as JSON, or with `stream: true` as server-sent events ending with `data: [DONE]`.",
        "content": {"application/json": {}, "text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
    }
}
_encoder = msgspec.json.Encoder()


def dumps(payload: Any) -> bytes:
    return _encoder.encode(payload)


def frame(payload: Any) -> bytes:
    return b"data: " + _encoder.encode(payload) + b"\n\n"


def error_frame(message: str, kind: ErrorKind = ErrorKind.INTERNAL) -> bytes:
    body = error_body(message, kind)
    body["error"]["code"] = kind.status
    return frame(body)


def sse_response(frames: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> EventSourceResponse:
    return EventSourceResponse(_ended(frames), headers=headers, ping=15, sep="\n")


async def _ended(frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The frames, and where they fail, an error event and `[DONE]`: once the headers have gone, a client can only
    learn of a failure from the stream itself, never from a connection cut short."""
    try:
        async for item in frames:
            yield item
    except APIError as error:
        yield error_frame(error.message, error.kind)
        yield DONE_FRAME
    except Exception:
        logger.exception("a stream failed after its headers were sent")
        yield error_frame("Internal server error.")
        yield DONE_FRAME
    finally:  # a disconnect closes this wrapper: the source's own `finally` (the abort) runs now, not at collection
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()
