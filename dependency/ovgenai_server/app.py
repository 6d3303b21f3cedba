"""The backend's app factory: engines are started in the lifespan and stopped (drained) on shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from ovgenai_common.app import create_service_app

from .engine.types import Engine
from .metrics import ServerMetrics
from .router import openai_router, service_router
from .serving import Serving
from .settings import BackendSettings

logger = logging.getLogger(__name__)


def create_app(settings: BackendSettings, engines: dict[str, Engine] | None = None) -> FastAPI:
    """Build the app. `engines` is injected by unit tests; by default OpenVINO engines are built from settings."""
    registry = CollectorRegistry()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = []
        if engines is None:
            from .devices import available_devices, check_device
            from .engine.client import OpenVINOEngine
            from .model_specs import load_model_specs

            specs = load_model_specs(settings)
            for spec in specs:
                check_device(spec.device, available_devices())
            def stop_server(engine: OpenVINOEngine) -> None:
                app.state.fatal_error = f"{engine.name}: {engine.fatal_error}"
                signal.raise_signal(signal.SIGTERM)

            for spec in specs:
                engine = OpenVINOEngine(spec, settings.log_level, settings.grammar_compile_timeout)
                engine.on_fatal = stop_server
                await engine.start()
                app.state.serving.engines[spec.name] = engine
                owned.append(engine)
                logger.info("serving %s from %s on %s", spec.name, spec.path, spec.device)
        try:
            yield
        finally:
            await asyncio.gather(*(engine.close() for engine in owned), return_exceptions=True)

    app = create_service_app(settings, title="OpenVINO GenAI server", lifespan=lifespan, registry=registry)
    serving = Serving(dict(engines or {}), settings, ServerMetrics(registry, lambda: serving.engines.values()))
    app.state.serving = serving
    app.state.registry = registry  # other fronts (TorchServe's metrics port) serve the same metrics
    app.state.fatal_error = None
    app.include_router(openai_router(), prefix="/v1")
    app.include_router(openai_router(), prefix="/v3")
    app.include_router(service_router())
    return app
