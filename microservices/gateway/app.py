"""The gateway's app factory: LangChain clients and the store live as long as the app."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry

from ovgenai_common.app import create_service_app
from ovgenai_common.security import PROBE_PATHS, OpenRoutes

from .headers import SecurityHeadersMiddleware
from .ingest_pool import IngestPool
from .links import LinkFetcher
from .metrics import IngestMetrics, RAGMetrics
from .rag import RAGPipeline
from .rerank import Reranker
from .router import STATIC, gateway_router
from .service import recover
from .settings import GatewaySettings
from .store import DocumentStore

logger = logging.getLogger(__name__)


class DependencyProbe:
    """Health of a dependency: its OPEA /v1/health_check, or /health. The reason leaves out the dependency's
    address (health is open to anyone who reaches the gateway); the log has it."""

    def __init__(self, client: httpx.AsyncClient):
        self.client = client

    async def check(self, base_url: str) -> tuple[bool, str]:
        base = base_url.rstrip("/").removesuffix("/v1")
        try:
            response = await self.client.get(base + "/v1/health_check", timeout=3)
            if response.status_code == 404:
                response = await self.client.get(base + "/health", timeout=3)
        except httpx.HTTPError as error:
            logger.warning("health check of %s failed: %s", base, type(error).__name__)
            return False, f"unreachable ({type(error).__name__})"
        if response.status_code != 200:
            logger.warning("health check of %s answered %d", base, response.status_code)
            return False, f"its health check answered {response.status_code}"
        return True, "ok"


def build_rag(settings: GatewaySettings, metrics: RAGMetrics, reranker: Reranker | None = None,
              ingest_metrics: IngestMetrics | None = None) -> RAGPipeline:
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        base_url=settings.embedding_endpoint.rstrip("/").removesuffix("/v1") + "/v1",
        api_key=settings.embedding_api_key,
        model=settings.embedding_model,
        check_embedding_ctx_length=False,
        request_timeout=settings.request_timeout,
        max_retries=0,
    )
    llm = ChatOpenAI(
        base_url=settings.llm_endpoint.rstrip("/").removesuffix("/v1") + "/v1",
        api_key=settings.llm_api_key,
        model=settings.llm_model,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        timeout=settings.request_timeout,
        max_retries=0,
    )
    return RAGPipeline(settings, DocumentStore(settings, embeddings, ingest_metrics), llm, metrics, reranker)


def create_app(settings: GatewaySettings) -> FastAPI:
    registry = CollectorRegistry()
    metrics = RAGMetrics(registry)
    ingest_metrics = IngestMetrics(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with httpx.AsyncClient() as client:
            reranker = None
            if settings.rerank_endpoint:
                reranker = Reranker(client, settings.rerank_endpoint, settings.rerank_api_key,
                                    settings.request_timeout)
            app.state.rag = build_rag(settings, metrics, reranker, ingest_metrics)
            # Before serving: documents a crash left partial are removed (or finished), spooled uploads swept.
            await asyncio.to_thread(recover, app.state.rag.store, settings)
            app.state.probes = DependencyProbe(client)
            app.state.links = LinkFetcher(settings)
            app.state.ingest_pool = IngestPool(settings.ingest_concurrency, settings.ingest_queue, ingest_metrics)
            try:
                yield
            finally:
                app.state.ingest_pool.shutdown()

    # The chat page and its files hold no data and a browser cannot send a key to load them; the page itself asks
    # for the key and sends it with every API call.
    page = OpenRoutes(PROBE_PATHS | {"/"}, prefixes=("/static/",))
    app = create_service_app(settings, title="ChatQnA RAG gateway", lifespan=lifespan, registry=registry,
                             open_routes=page)
    app.add_middleware(SecurityHeadersMiddleware)
    app.include_router(gateway_router())
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
