"""The embedding microservice's app factory: the model loads in the lifespan (health is 503 until then)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram

from ovgenai_common.app import create_service_app

from .router import embedding_router
from .service import EmbeddingService
from .settings import EmbeddingSettings

logger = logging.getLogger(__name__)


class EmbeddingMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter("embedding_requests", "Embedding requests served.", registry=registry)
        self.tokens = Counter("embedding_tokens", "Tokens embedded.", registry=registry)
        self.latency = Histogram(
            "embedding_request_seconds", "Embedding request latency.", registry=registry,
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.batch_size = Histogram(
            "embedding_batch_size", "Texts per pipeline call.", registry=registry,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
        )

    def observe_request(self, seconds: float, tokens: int) -> None:
        self.requests.inc()
        self.tokens.inc(tokens)
        self.latency.observe(seconds)

    def observe_batch(self, size: int, _tokens: int) -> None:
        self.batch_size.observe(size)


def create_app(settings: EmbeddingSettings) -> FastAPI:
    registry = CollectorRegistry()
    metrics = EmbeddingMetrics(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        service = await loop.run_in_executor(None, EmbeddingService, settings, metrics)
        service.start()
        app.state.service = service
        logger.info("serving embeddings of %s (%d dimensions)", service.name, service.dimensions)
        try:
            yield
        finally:
            await service.close()

    app = create_service_app(settings, title="OpenVINO embedding microservice", lifespan=lifespan, registry=registry)
    app.include_router(embedding_router())
    return app
