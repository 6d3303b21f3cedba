"""App factory shared by the services: error table, body limits, API key or local-access checks, CORS, request ids,
/metrics."""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from .body import BodyLimitMiddleware
from .errors import document_errors, install_error_handlers
from .logs import setup_logging
from .request_context import RequestIdMiddleware, responses_counter
from .security import APIKeyMiddleware, LocalAccessMiddleware, OpenRoutes, cors_options, exposure_warning
from .settings import ServiceSettings
from .startup import LoadingFront, PortInUse, listening
from .tracing import configure_tracing, fastapi_telemetry

logger = logging.getLogger(__name__)


def secure(app: FastAPI, settings: ServiceSettings, open_routes: OpenRoutes | None = None,
           bound_host: str | None = None, upload_paths: Iterable[str] | None = None) -> None:
    """Who may call `app` (ovgenai_common/security.py) and how large a body it reads (body.py), outermost first:
    CORS for ALLOWED_ORIGINS (a browser's preflight carries no key), the key (or, without one, the host and origin
    checks), then the body limits (`upload_paths`: the only routes whose bodies may pass the JSON limit)."""
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes,
                       max_json_bytes=settings.max_json_bytes, max_json_depth=settings.max_json_depth,
                       body_timeout=settings.body_timeout, upload_paths=upload_paths)
    if settings.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key, open_routes=open_routes)
    else:
        app.add_middleware(LocalAccessMiddleware, bound_host=bound_host or settings.host,
                           allowed_hosts=settings.allowed_hosts, open_routes=open_routes,
                           allowed_origins=settings.allowed_origins)
    if settings.allowed_origins:
        app.add_middleware(CORSMiddleware, **cors_options(settings.allowed_origins))


def create_service_app(
    settings: ServiceSettings,
    *,
    title: str,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[Any]] | None = None,
    registry: CollectorRegistry = REGISTRY,
    open_routes: OpenRoutes | None = None,
    service_name: str = "ovgenai",
    upload_paths: Iterable[str] | None = None,
) -> FastAPI:
    """The service's app with the shared error table, security and body limits, request ids, /live and /metrics,
    and tracing when an OTLP endpoint is set (`service_name` names its spans unless the settings do).
    `open_routes`: what needs no API key (default: the probes). `upload_paths`: the routes that take bodies other
    than JSON up to MAX_REQUEST_BYTES; every other route's body is held to MAX_JSON_BYTES (default: none named, so
    any route's may)."""
    provider = configure_tracing(settings.otel_exporter_otlp_endpoint, settings.otel_service_name or service_name)
    # FastAPI >= 0.165 instruments requests with OpenTelemetry itself: on our provider when tracing is on, and off
    # otherwise, whatever provider a library (chromadb brings the SDK along) or the environment configured.
    app = FastAPI(title=title, lifespan=_flushing_spans(lifespan, provider), telemetry=fastapi_telemetry(provider))
    app.state.settings = settings
    install_error_handlers(app)
    app.openapi = lambda: app.openapi_schema or _documented_openapi(app)
    secure(app, settings, open_routes, upload_paths=upload_paths)
    # Outermost: every log line of the request and every call it makes upstream carry its id, even a refusal's.
    app.add_middleware(RequestIdMiddleware, responses=responses_counter(registry))

    @app.get("/live", include_in_schema=False)
    async def live() -> dict:
        """Liveness: the process serves HTTP. Readiness (dependencies, model loaded) is /health."""
        return {"status": "alive"}

    @app.get("/metrics", include_in_schema=False)
    async def metrics(_: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _flushing_spans(lifespan: Callable[[FastAPI], AbstractAsyncContextManager[Any]] | None, provider: Any | None):
    """The service's lifespan, then the spans still buffered sent before the process exits."""
    if provider is None:
        return lifespan

    @contextlib.asynccontextmanager
    async def with_flush(app: FastAPI):
        try:
            if lifespan is None:
                yield
            else:
                async with lifespan(app) as state:
                    yield state
        finally:
            provider.shutdown()

    return with_flush


def _documented_openapi(app: FastAPI) -> dict[str, Any]:
    app.openapi_schema = document_errors(
        get_openapi(title=app.title, version=app.version, routes=app.routes, openapi_version=app.openapi_version)
    )
    return app.openapi_schema


def run_app(app: FastAPI, settings: ServiceSettings, sock: socket.socket | None = None) -> None:
    """Serve with uvicorn on `sock` (bound here when not given: startup.listening), the app's startup behind a front
    that answers while it loads (startup.LoadingFront); SIGTERM stops accepting, lets running requests finish
    (bounded), then exits 0. A startup that fails exits 3, saying why."""
    import uvicorn

    if sock is None:
        sock = bound(settings)
    warning = exposure_warning(settings.host, settings.api_key)
    if warning:
        logger.warning(warning)

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

    front = LoadingFront(app)
    config = uvicorn.Config(
        front,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # uvicorn's lines go through the root logger's handler, in the service's log format
        timeout_graceful_shutdown=settings.graceful_shutdown_seconds,
        access_log=False,
        # Who a client is (clients.py): X-Forwarded-For only from the proxies the operator lists, never by default.
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=list(settings.forwarded_allow_ips),
        ssl_keyfile=settings.ssl_keyfile,
        ssl_certfile=settings.ssl_certfile,
    )
    server = DrainingServer(config)
    front.stop_server = lambda: setattr(server, "should_exit", True)
    # uvicorn says where it listens only for a socket it binds itself.
    host, port = sock.getsockname()[:2]
    scheme = "https" if settings.ssl_certfile else "http"
    logger.info("listening on %s://%s:%d, loading (/health answers 503 until ready)", scheme,
                f"[{host}]" if ":" in host else host, port)
    server.run(sockets=[sock])
    if front.failed is not None:
        raise SystemExit(3)


def bound(settings: ServiceSettings) -> socket.socket:
    """The service's socket, before anything loads; a busy port exits at once (2), naming it."""
    try:
        return listening(settings.host, settings.port)
    except PortInUse as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(2) from None


def serve_from_cli(settings_class: type[ServiceSettings], create_app: Callable[[Any], FastAPI]) -> None:
    """The `python -m <service>` entry point: settings from flags and environment, logging, then serve."""
    from pydantic_settings import CliApp

    settings = CliApp.run(settings_class, cli_args=sys.argv[1:])
    setup_logging(settings.log_level, settings.log_format)
    sock = bound(settings)  # before the app, whose modules and models may take seconds
    run_app(create_app(settings), settings, sock)
