"""The LLM microservice's app factory: the pooled backend client lives as long as the app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from ovgenai_common.app import create_service_app

from .metrics import ProxyMetrics
from .router import router
from .service import Backend
from .settings import LLMSettings


def create_app(settings: LLMSettings, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    registry = CollectorRegistry()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.backend = Backend(settings, transport, on_route=app.state.metrics.routed)
        try:
            yield
        finally:
            await app.state.backend.close()

    app = create_service_app(settings, title="OPEA LLM microservice", service_name="llm",
                             lifespan=lifespan, registry=registry)
    app.state.metrics = ProxyMetrics(registry)
    app.include_router(router)
    return app
