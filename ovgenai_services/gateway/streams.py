"""The answer as server-sent events, in one of two formats.

- `openai` (the default): proper chat.completion.chunk events; the final chunk carries the sources and the
  per-stage timings, then (with `stream_options.include_usage`) a usage chunk; `data: [DONE]` ends the stream.
- `opea`: what OPEA's ChatQnA megaservice sends and its UIs parse: each piece of text as `data: b'...'` (Python's
  repr of its UTF-8 bytes), then `data: [DONE]`. It has no place for sources.

Either way a failure of the LLM mid-stream ends with an error event and `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.sse import DONE_FRAME, error_frame, frame

logger = logging.getLogger(__name__)
StreamFormat = Literal["openai", "opea"]


@dataclass
class Ending:
    """What the LLM said once its text ended: why, and what it counted (OpenAI's usage names)."""

    finish: str = "stop"
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                             "total_tokens": 0})


async def texts(first: Any, chunks: AsyncIterator[Any], ending: Ending) -> AsyncIterator[str]:
    """The text of LangChain's message chunks, the first one already received; the finish reason goes to `ending`."""
    pending = [first] if first is not None else []
    try:
        while True:
            piece = pending.pop() if pending else await anext(chunks)
            ending.finish = piece.response_metadata.get("finish_reason") or ending.finish
            if piece.usage_metadata:  # the upstream's usage chunk (LangChain's stream_usage)
                counted = piece.usage_metadata
                ending.usage = {"prompt_tokens": counted["input_tokens"],
                                "completion_tokens": counted["output_tokens"],
                                "total_tokens": counted["total_tokens"]}
            if piece.content:
                yield str(piece.content)
    except StopAsyncIteration:
        return
    except asyncio.CancelledError:
        await chunks.aclose()  # client went away: close the upstream stream too
        raise


async def frames(
    pieces: AsyncIterator[str],
    ending: Ending,
    fmt: StreamFormat,
    model: str,
    closing: Callable[[], dict[str, Any]],
    failed: Callable[[Exception], APIError],
    include_usage: bool = False,
) -> AsyncIterator[bytes]:
    """`closing()` gives what the final OpenAI chunk carries besides the finish reason (called once the text ends);
    `failed` names what went wrong upstream; `include_usage` (OpenAI's `stream_options`) adds the usage chunk."""
    rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return frame({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    # The role rides on the first text, as the backend sends it: a first chunk without text would read as the
    # first token to benchmark clients.
    role = {"role": "assistant"}
    try:
        async for text in pieces:
            if fmt == "opea":
                yield f"data: {text.encode()!r}\n\n".encode()
            else:
                yield chunk({**role, "content": text})
                role = {}
    except Exception as error:
        logger.warning("LLM stream failed: %s", error)
        yield error_frame(failed(error).message, ErrorKind.UNAVAILABLE)
        yield DONE_FRAME
        return
    extra = closing()
    if fmt == "openai":
        if role:  # an answer without text still opens with the role
            yield chunk({**role, "content": ""})
        yield chunk({}, ending.finish, **extra)
        if include_usage:  # as OpenAI sends it: no choices, after the last one
            yield frame({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [], "usage": ending.usage})
    yield DONE_FRAME
