"""Talking to the backend: one pooled client per replica (ovgenai_common/upstream.py: its errors, timeouts and
health probe), health answers reused for a bounded time, each request routed to a replica (replicas.py), streams
passed through.

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
from ovgenai_common.upstream import NotRun, Upstream

from .replicas import Balancer
from .settings import LLMSettings

logger = logging.getLogger(__name__)
_DONE_TAIL = b"data: [DONE]"


class Replica:
    """One backend: its pooled client, its health answers reused for a bounded time, and its load."""

    def __init__(self, index: int, url: str, settings: LLMSettings, transport: httpx.AsyncBaseTransport | None,
                 clock: Callable[[], float]):
        self.index = index
        self.upstream = Upstream(
            "backend", url, api_key=settings.backend_api_key,
            timeout=httpx.Timeout(settings.read_timeout, connect=settings.connect_timeout),
            health_timeout=settings.health_timeout, max_connections=settings.max_connections, transport=transport,
        )
        self.settings = settings
        self.in_flight = 0
        self.down = False
        self._clock = clock
        self._health_check: asyncio.Future[tuple[bool, str]] | None = None
        self._healthy_at: float | None = None  # when the backend last said it was healthy

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
        self.down = not ok
        return ok, reason

    def failed(self) -> None:
        """Unusable: the next probe checks again instead of trusting the last answer, and requests try it last."""
        self._healthy_at = None
        self.down = True


class Backend:
    """The backend replicas (one, or several of one model): requests routed by replicas.Balancer."""

    def __init__(
        self,
        settings: LLMSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_route: Callable[[int], None] | None = None,
    ):
        self.settings = settings
        self.replicas = [Replica(index, url, settings, transport, clock)
                         for index, url in enumerate(settings.endpoints)]
        self.balancer = Balancer(len(self.replicas), settings.routing, settings.route_prefix_chars,
                                 settings.route_load_factor)
        self._on_route = on_route
        self._streams: dict[int, Replica] = {}  # an open stream's response (by id) -> the replica serving it

    async def close(self) -> None:
        for replica in self.replicas:
            await replica.upstream.aclose()

    async def health(self) -> tuple[bool, str]:
        """Healthy when any replica is (requests go around the others); the reason names each one that is not."""
        answers = await asyncio.gather(*(replica.health() for replica in self.replicas))
        if len(answers) == 1:
            return answers[0]
        if any(ok for ok, _ in answers):
            return True, "ok"
        return False, "; ".join(f"replica {index + 1}: {reason}" for index, (_, reason) in enumerate(answers))

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                      stream: bool = False) -> httpx.Response:
        """The answer below 400 of the replica chosen for `body`. Only a failure that ran nothing there (`NotRun`:
        no connection, a 429, no such route) sends it on to the next replica; any other failure may have run it, so
        it is the client's answer (a request that made one backend fail would make the next fail too). A replica
        that could not be reached or answered 503 is tried last until its health check passes."""
        failure: APIError | None = None
        for index in self.balancer.order(body, self.replicas):
            replica = self.replicas[index]
            replica.in_flight += 1
            try:
                response = await replica.upstream.request(method, path, json=body, stream=stream)
            except BaseException as error:  # cancelled too (our client left): the replica serves it no longer
                replica.in_flight -= 1
                if isinstance(error, APIError) and error.kind is ErrorKind.UNAVAILABLE:
                    replica.failed()  # a 429 is a busy replica, not a broken one
                if not isinstance(error, NotRun):
                    raise
                failure = error
                continue
            if stream:
                self._streams[id(response)] = replica  # released when the relay ends
            else:
                replica.in_flight -= 1
            if self._on_route is not None:
                self._on_route(index)
            return response
        assert failure is not None  # there is at least one replica
        raise failure

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.request("POST", path, body)

    async def open_stream(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """Send the request and wait for the backend's status line, so errors before the stream are HTTP errors."""
        return await self.request("POST", path, body, stream=True)

    async def release(self, response: httpx.Response) -> None:
        """The end of a relayed stream, however it ended (done, failed, or our client gone): its replica's count
        down, and the upstream request closed, which makes the backend abort the generation and free its KV cache.
        Idempotent."""
        replica = self._streams.pop(id(response), None)
        if replica is not None:
            replica.in_flight -= 1
        await response.aclose()

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
            await self.release(response)
        logger.warning("stream from backend failed: %s", message)
        yield b"\n\n"  # terminate a partial event before ours
        yield error_frame(message, ErrorKind.UPSTREAM)
        yield DONE_FRAME
