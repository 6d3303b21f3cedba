"""The embedding microservice's app factory: the model process loads the model in the lifespan (health is 503 until
then)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from ovgenai_common.app import create_service_app

from .metrics import EmbeddingMetrics
from .router import router
from .service import EmbeddingService
from .settings import EmbeddingSettings

logger = logging.getLogger(__name__)


def create_app(settings: EmbeddingSettings) -> FastAPI:
    registry = CollectorRegistry()
    metrics = EmbeddingMetrics(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = await EmbeddingService.load(settings, metrics)
        service.start()
        app.state.service = service
        logger.info("serving embeddings of %s (%d dimensions)", service.name, service.dimensions)
        try:
            yield
        finally:
            await service.close()

    app = create_service_app(settings, title="OpenVINO embedding microservice", service_name="embedding",
                             lifespan=lifespan, registry=registry)
    app.state.service = None  # until the lifespan has loaded the model
    app.include_router(router)
    return app
