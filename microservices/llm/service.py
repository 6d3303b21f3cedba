"""Talking to the backend: one pooled client (ovgenai_common/upstream.py: its errors, timeouts and health probe),
health answers reused for a bounded time, streams passed through.

The stream is relayed as the backend's raw bytes (no parsing or re-encoding per token). The relay keeps only the
last few bytes to know whether the backend finished with `data: [DONE]`; if the backend fails or cuts the stream,
the client gets an error event and `data: [DONE]` instead of a silently truncated stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.sse import DONE_FRAME, error_frame
from ovgenai_common.upstream import Upstream

from .settings import LLMSettings

logger = logging.getLogger(__name__)
_DONE_TAIL = b"data: [DONE]"


class Backend:
    def __init__(
        self,
        settings: LLMSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.settings = settings
        self.upstream = Upstream(
            "backend", settings.llm_endpoint, api_key=settings.backend_api_key,
            timeout=httpx.Timeout(settings.read_timeout, connect=settings.connect_timeout),
            health_timeout=settings.health_timeout, max_connections=settings.max_connections, transport=transport,
        )
        self._clock = clock
        self._health_check: asyncio.Future[tuple[bool, str]] | None = None
        self._healthy_at: float | None = None  # when the backend last said it was healthy

    async def close(self) -> None:
        await self.upstream.aclose()

    async def health(self) -> tuple[bool, str]:
        """(healthy, reason): the shared probe (the backend's /health, or /v1/models for OpenAI servers without one).

        Probes that arrive while a check is in flight join it instead of sending another. A healthy answer is
        reused for `health_cache_seconds` and refreshed in the background after half of that, so a probe under
        load costs no round trip behind the streams; an unhealthy one is never reused (recovery shows at once),
        and a request that finds the backend unreachable forgets the healthy one.
        """
        if self._healthy_at is not None:
            age = self._clock() - self._healthy_at
            if age < self.settings.health_cache_seconds:
                if age >= self.settings.health_cache_seconds / 2:
                    self._start_check()
                return True, "ok"
        return await asyncio.shield(self._start_check())

    def _start_check(self) -> asyncio.Future[tuple[bool, str]]:
        if self._health_check is None or self._health_check.done():
            self._health_check = asyncio.ensure_future(self._remember(self.upstream.health()))
        return self._health_check

    async def _remember(self, check: Awaitable[tuple[bool, str]]) -> tuple[bool, str]:
        ok, reason = await check
        self._healthy_at = self._clock() if ok else None
        return ok, reason

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                      stream: bool = False) -> httpx.Response:
        """The backend's answer below 400; otherwise the shared error (ovgenai_common/upstream.py)."""
        try:
            return await self.upstream.request(method, path, json=body, stream=stream)
        except APIError as error:
            if error.kind is ErrorKind.UNAVAILABLE:
                self._healthy_at = None  # unusable: the next probe checks again instead of trusting the last answer
            raise

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.request("POST", path, body)

    async def open_stream(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """Send the request and wait for the backend's status line, so errors before the stream are HTTP errors."""
        return await self.request("POST", path, body, stream=True)

    async def relay(self, response: httpx.Response) -> AsyncIterator[bytes]:
        tail, done = b"", False
        try:
            async for chunk in response.aiter_raw():
                # `data: [DONE]` may be split across reads, and keep-alive comments may follow it: look for it
                # in each read plus the end of the previous one.
                window = tail + chunk
                done = done or _DONE_TAIL in window
                tail = window[-len(_DONE_TAIL):]
                yield chunk
            if done:
                return
            message = "The backend ended the stream early."
        except httpx.TimeoutException:
            message = "The backend stopped sending tokens (read timeout)."
        except httpx.HTTPError as error:
            message = f"The backend connection failed mid-stream ({type(error).__name__})."
        finally:
            # Also reached when our client disconnects (the relay is cancelled): closing the upstream request
            # makes the backend abort the generation and free its KV cache.
            await response.aclose()
        logger.warning("stream from backend failed: %s", message)
        yield b"\n\n"  # terminate a partial event before ours
        yield error_frame(message, ErrorKind.UPSTREAM)
        yield DONE_FRAME
