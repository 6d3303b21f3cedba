"""Talking to the backend: one pooled httpx client, errors mapped to the shared table, streams passed through.

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
        headers = {"Authorization": f"Bearer {settings.backend_api_key}"} if settings.backend_api_key else {}
        self.client = httpx.AsyncClient(
            base_url=settings.base_url,
            headers=headers,
            timeout=httpx.Timeout(settings.read_timeout, connect=settings.connect_timeout),
            limits=httpx.Limits(max_connections=settings.max_connections,
                                max_keepalive_connections=settings.max_connections),
            transport=transport,
        )
        # Health checks have a connection of their own, so that they never queue behind streams for a pooled one.
        self.health_client = httpx.AsyncClient(
            base_url=settings.base_url, headers=headers, timeout=settings.health_timeout,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1), transport=transport,
        )
        self._clock = clock
        self._health_check: asyncio.Future[tuple[bool, str]] | None = None
        self._healthy_at: float | None = None  # when the backend last said it was healthy

    async def close(self) -> None:
        await self.client.aclose()
        await self.health_client.aclose()

    async def health(self) -> tuple[bool, str]:
        """(healthy, reason): the backend's own /health, or /v1/models for servers that have none.

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
            self._health_check = asyncio.ensure_future(self._remember(self._check_health()))
        return self._health_check

    async def _remember(self, check: Awaitable[tuple[bool, str]]) -> tuple[bool, str]:
        ok, reason = await check
        self._healthy_at = self._clock() if ok else None
        return ok, reason

    async def _check_health(self) -> tuple[bool, str]:
        try:
            response = await self.health_client.get("/health")
            if response.status_code == 404:
                response = await self.health_client.get("/v1/models")
        except httpx.TimeoutException:
            logger.warning("the backend at %s did not answer its health check in time", self.settings.base_url)
            return False, "the backend did not answer its health check in time"
        except httpx.HTTPError as error:
            logger.warning("the backend at %s is unreachable: %s", self.settings.base_url, type(error).__name__)
            return False, f"the backend is unreachable ({type(error).__name__})"
        if response.status_code == 200:
            return True, "ok"
        return False, f"backend health check returned {response.status_code}: {_message(response)}"

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        try:
            response = await self.client.post(path, json=body)
        except httpx.HTTPError as error:
            raise self._transport_error(error) from error
        if response.status_code >= 400:
            raise _upstream_error(response)
        return response

    async def open_stream(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """Send the request and wait for the backend's status line, so errors before the stream are HTTP errors."""
        request = self.client.build_request("POST", path, json=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise self._transport_error(error) from error
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise _upstream_error(response)
        return response

    def _transport_error(self, error: httpx.HTTPError) -> APIError:
        logger.warning("request to the backend at %s failed: %s", self.settings.base_url, type(error).__name__)
        api_error = _transport_error(error)
        if api_error.kind is ErrorKind.UNAVAILABLE:
            self._healthy_at = None  # unreachable: the next probe checks again instead of trusting the last answer
        return api_error

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


def _error_fields(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"message": response.text[:500]}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"]
    if isinstance(body, dict) and "detail" in body:
        return {"message": str(body["detail"])}
    return {"message": str(body)[:500]}


def _message(response: httpx.Response) -> str:
    return str(_error_fields(response).get("message", ""))


def _upstream_error(response: httpx.Response) -> APIError:
    """Backend 4xx (and 503/504) keep their status and message; other 5xx become 502."""
    status = response.status_code
    fields = _error_fields(response)
    message = str(fields.get("message") or f"Backend returned {status}.")
    if 400 <= status < 500 or status in (503, 504):
        return APIError(ErrorKind.from_status(status), message, fields.get("param"), fields.get("code"), status)
    return APIError(ErrorKind.UPSTREAM, f"The backend failed ({status}): {message}")


def _transport_error(error: httpx.HTTPError) -> APIError:
    """Said without the backend's address, which clients need not learn (the log has it)."""
    if isinstance(error, httpx.TimeoutException) and not isinstance(error, httpx.ConnectTimeout):
        return APIError(ErrorKind.TIMEOUT, "The backend timed out.")
    return APIError(ErrorKind.UNAVAILABLE, f"The backend is unreachable ({type(error).__name__}).")
