"""App factory shared by the services: logging, error table, body limits, API key or local-access checks, /metrics."""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from starlette.responses import Response

from .body import BodyLimitMiddleware
from .errors import document_errors, install_error_handlers
from .security import APIKeyMiddleware, LocalAccessMiddleware, OpenRoutes, exposure_warning
from .settings import ServiceSettings
from .upstream import RequestIdMiddleware

NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False, "auto_configure": False}
logger = logging.getLogger(__name__)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    # One line per request is ours to write; the HTTP clients' own per-call lines are noise at INFO.
    for noisy in ("httpx", "httpx2", "httpcore", "chromadb", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


def secure(app: FastAPI, settings: ServiceSettings, open_routes: OpenRoutes | None = None,
           bound_host: str | None = None) -> None:
    """Who may call `app` (ovgenai_common/security.py) and how large a body it reads (body.py), outermost first:
    the key (or, without one, the host and origin checks), then the body limits."""
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes,
                       max_json_bytes=settings.max_json_bytes, max_json_depth=settings.max_json_depth)
    if settings.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key, open_routes=open_routes)
    else:
        app.add_middleware(LocalAccessMiddleware, bound_host=bound_host or settings.host,
                           allowed_hosts=settings.allowed_hosts, open_routes=open_routes)


def create_service_app(
    settings: ServiceSettings,
    *,
    title: str,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[Any]] | None = None,
    registry: CollectorRegistry = REGISTRY,
    open_routes: OpenRoutes | None = None,
) -> FastAPI:
    """The service's app with the shared error table, security and body limits, /live and /metrics.
    `open_routes`: what needs no API key (default: the probes)."""
    # FastAPI >= 0.165 instruments every request with OpenTelemetry when a provider is configured (chromadb brings
    # the SDK along); these services export nothing, so that stays off whatever the environment says.
    app = FastAPI(title=title, lifespan=lifespan, telemetry=NO_TELEMETRY)
    app.state.settings = settings
    install_error_handlers(app)
    app.openapi = lambda: app.openapi_schema or _documented_openapi(app)
    secure(app, settings, open_routes)
    app.add_middleware(RequestIdMiddleware)  # outermost: the calls a request makes upstream carry its id

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
