"""Listen first, load second: a service's port is bound before anything is loaded, so that a busy port fails at
once, naming it, and probes get an answer rather than "connection refused" while the service loads its models. Its
app's startup (models, stores, clients) then runs behind a front that answers `/live` and, until the startup is
done, a 503 with Retry-After on every other route."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import socket
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ErrorKind, error_body
from .sse import dumps

logger = logging.getLogger(__name__)

RETRY_AFTER = 5  # seconds a client is told to wait while the service starts
LIVE_PATHS = frozenset({"/live", "/v2/health/live"})  # alive while loading: liveness is the process, not its models


class PortInUse(Exception):
    """The service's port is taken: said at once, before anything loads."""


def listening(host: str, port: int) -> socket.socket:
    """The service's socket, bound and listening (port 0: any free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT does not hold a port
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} on {host} is in use by another program: stop it, or set PORT "
                            "(or --port) to another") from None
        raise PortInUse(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class LoadingFront:
    """The app's lifespan started in the background at the server's start; until its startup completes, `/live` is
    200 and every other route a 503 with Retry-After. A startup that fails stops the server (`failed` says why)."""

    def __init__(self, app: ASGIApp, stop_server: Any = None):
        self.app = app
        self.stop_server = stop_server  # called when the app's startup fails
        self.ready = asyncio.Event()
        self.failed: str | None = None
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
        elif self.ready.is_set() and self.failed is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await self._loading(scope, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._task = asyncio.create_task(self._run_app_lifespan(scope))
                await send({"type": "lifespan.startup.complete"})  # the server listens now; the app loads behind
            elif message["type"] == "lifespan.shutdown":
                if self._task is not None and not self.ready.is_set():  # stopped while it loads: the load ends
                    self._task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._task
                elif self._task is not None:
                    await self._inbox.put({"type": "lifespan.shutdown"})
                    await self._ended.wait()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _run_app_lifespan(self, scope: Scope) -> None:
        await self._inbox.put({"type": "lifespan.startup"})

        async def sent(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "lifespan.startup.complete":
                # Everything alive now (libraries, models, the app) lives as long as the process: out of the garbage
                # collector's reach, so that a full collection under load scans only request garbage instead of
                # pausing the event loop (and /health) for the whole heap, as vLLM does after start-up.
                gc.collect()
                gc.freeze()
                logger.info("started: serving")
                self.ready.set()
            elif kind == "lifespan.startup.failed":
                self._fail(message.get("message") or "the service could not start")
            elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                self._ended.set()

        try:
            await self.app({**scope, "type": "lifespan"}, self._inbox.get, sent)
        except Exception as error:  # an app without a lifespan of its own raises nothing; any other failure stops
            self._fail(f"{type(error).__name__}: {error}")
        finally:
            self.ready.set()
            self._ended.set()

    def _fail(self, reason: str) -> None:
        logger.error("the service could not start: %s", reason)
        self.failed = reason
        self.ready.set()
        if self.stop_server is not None:
            self.stop_server()

    async def _loading(self, scope: Scope, send: Send) -> None:
        if scope.get("path") in LIVE_PATHS:
            status, body, headers = 200, dumps({"status": "alive"}), []
        else:
            message = "The service is starting: it loads its models; retry shortly." if self.failed is None else \
                "The service could not start; see its log."
            status = 503
            body = dumps(error_body(message, ErrorKind.UNAVAILABLE, code=503))
            headers = [(b"retry-after", str(RETRY_AFTER).encode())]
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *headers]})
        await send({"type": "http.response.body", "body": body})
