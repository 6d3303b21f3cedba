"""App factory shared by the services: logging, error table, body-size limit, optional API key, /metrics."""

from __future__ import annotations

import contextlib
import gc
import hmac
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import APIError, ErrorKind, document_errors, error_response, install_error_handlers
from .settings import ServiceSettings

# TorchServe's inference and management routes too (the backend's TorchServe front); probes stay open.
PROTECTED_PREFIXES = ("/v1/", "/v3/", "/predictions/", "/models")
OPEN_PATHS = frozenset({"/v1/health_check", "/health", "/live", "/metrics"})
NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False, "auto_configure": False}


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    # One line per request is ours to write; the HTTP clients' own per-call lines are noise at INFO.
    for noisy in ("httpx", "httpx2", "httpcore", "chromadb", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


class BodyLimitMiddleware:
    """413 for bodies over the limit, checked on Content-Length and again while the body streams in."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = APIError(
            ErrorKind.PAYLOAD_TOO_LARGE, f"Request body exceeds the limit of {self.max_bytes} bytes."
        )
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await error_response(too_large)(scope, receive, send)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise too_large
            return message

        await self.app(scope, limited_receive, send)


class APIKeyMiddleware:
    """Bearer-token check on the API routes (PROTECTED_PREFIXES); health and metrics stay open for probes."""

    def __init__(self, app: ASGIApp, api_key: str):
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith(PROTECTED_PREFIXES) and path not in OPEN_PATHS:
            given = dict(scope.get("headers", ())).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                error = APIError(ErrorKind.UNAUTHORIZED, "Invalid or missing API key.", code="invalid_api_key")
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_service_app(
    settings: ServiceSettings,
    *,
    title: str,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[Any]] | None = None,
    registry: CollectorRegistry = REGISTRY,
) -> FastAPI:
    # FastAPI >= 0.165 instruments every request with OpenTelemetry when a provider is configured (chromadb brings
    # the SDK along); these services export nothing, so that stays off whatever the environment says.
    app = FastAPI(title=title, lifespan=lifespan, telemetry=NO_TELEMETRY)
    app.state.settings = settings
    install_error_handlers(app)
    app.openapi = lambda: app.openapi_schema or _documented_openapi(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    if settings.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key)

    @app.get("/live", include_in_schema=False)
    async def live() -> dict:
        """Liveness: the process serves HTTP. Readiness (dependencies, model loaded) is /health."""
        return {"status": "alive"}

    @app.get("/metrics", include_in_schema=False)
    async def metrics(_: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _documented_openapi(app: FastAPI) -> dict[str, Any]:
    app.openapi_schema = document_errors(
        get_openapi(title=app.title, version=app.version, routes=app.routes, openapi_version=app.openapi_version)
    )
    return app.openapi_schema


def run_app(app: FastAPI, settings: ServiceSettings) -> None:
    """Serve with uvicorn; SIGTERM stops accepting, lets running requests finish (bounded), then exits 0."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        # uvicorn re-raises the captured SIGTERM after its graceful shutdown, so the process would die "by
        # signal"; a completed drain is a clean exit, so forget the signal once shutdown is done.
        @contextlib.contextmanager
        def capture_signals(self):
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()  # private: uvicorn has no public way to forget the signal

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            # Everything alive now (libraries, models, the app) lives as long as the process: move it out of the
            # garbage collector's reach, so that a full collection under load scans only request garbage instead
            # of pausing the event loop (and /health) for the whole heap, as vLLM does after start-up.
            gc.collect()
            gc.freeze()

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=settings.graceful_shutdown_seconds,
        access_log=False,
    )
    DrainingServer(config).run()


def serve_from_cli(settings_class: type[ServiceSettings], create_app: Callable[[Any], FastAPI]) -> None:
    """The `python -m <service>` entry point: settings from flags and environment, logging, then serve."""
    import sys

    from pydantic_settings import CliApp

    settings = CliApp.run(settings_class, cli_args=sys.argv[1:])
    setup_logging(settings.log_level)
    run_app(create_app(settings), settings)
