"""The one builder of stream chunks: every chunk of a stream shares its envelope (id, object, created, model)."""

from __future__ import annotations

import time
from typing import Any, Literal

from ovgenai_common.sse import frame

_OBJECTS = {"chat": "chat.completion.chunk", "completion": "text_completion"}


class StreamChunks:
    def __init__(self, rid: str, kind: Literal["chat", "completion"], model: str):
        self.envelope: dict[str, Any] = {"id": rid, "object": _OBJECTS[kind], "created": int(time.time()),
                                         "model": model}

    @property
    def rid(self) -> str:
        return self.envelope["id"]

    def choice(self, index: int, finish: str | None = None, logprobs: Any = None, stop_reason: str | None = None,
               **body: Any) -> bytes:
        """One choice's chunk; `body` is `delta=` for chat, `text=` for completions. The last one says the stop
        string the text ended at, if it did (vLLM's `stop_reason`)."""
        choice = {"index": index, **body, "logprobs": logprobs, "finish_reason": finish}
        if finish is not None:
            choice["stop_reason"] = stop_reason
        return frame({**self.envelope, "choices": [choice]})

    def usage(self, usage: dict[str, int]) -> bytes:
        """The closing usage chunk (`stream_options.include_usage`): no choices."""
        return frame({**self.envelope, "choices": [], "usage": usage})
