"""The gateway's app factory: LangChain clients and the store live as long as the app."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry

from ovgenai_common.app import create_service_app
from ovgenai_common.security import PROBE_PATHS, OpenRoutes
from ovgenai_common.upstream import Upstream, openai_base

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


def build_rag(settings: GatewaySettings, metrics: RAGMetrics, upstreams: dict[str, Upstream],
              reranker: Reranker | None = None, ingest_metrics: IngestMetrics | None = None) -> RAGPipeline:
    """LangChain's clients of the embedding and LLM services, on their upstreams' pooled clients (timeouts,
    request ids)."""
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        base_url=openai_base(settings.embedding_endpoint),
        http_async_client=upstreams["embedding"].client,
        api_key=settings.embedding_api_key,
        model=settings.embedding_model,
        check_embedding_ctx_length=False,
        request_timeout=settings.request_timeout,
        max_retries=0,
    )
    llm = ChatOpenAI(
        base_url=openai_base(settings.llm_endpoint),
        http_async_client=upstreams["llm"].client,
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
        upstreams = {
            "embedding": Upstream("embedding service", settings.embedding_endpoint, api_key=settings.embedding_api_key,
                                  timeout=settings.request_timeout),
            "llm": Upstream("LLM service", settings.llm_endpoint, api_key=settings.llm_api_key,
                            timeout=settings.request_timeout),
        }
        if settings.rerank_endpoint:
            upstreams["rerank"] = Upstream("rerank service", settings.rerank_endpoint,
                                           api_key=settings.rerank_api_key, timeout=settings.request_timeout)
        reranker = Reranker(upstreams["rerank"], settings.request_timeout) if "rerank" in upstreams else None
        try:
            app.state.rag = build_rag(settings, metrics, upstreams, reranker, ingest_metrics)
            # Before serving: documents a crash left partial are removed (or finished), spooled uploads swept.
            await asyncio.to_thread(recover, app.state.rag.store, settings)
            app.state.upstreams = upstreams
            app.state.links = LinkFetcher(settings)
            app.state.ingest_pool = IngestPool(settings.ingest_concurrency, settings.ingest_queue, ingest_metrics)
            try:
                yield
            finally:
                app.state.ingest_pool.shutdown()
        finally:
            for upstream in upstreams.values():
                await upstream.aclose()

    # The chat page and its files hold no data and a browser cannot send a key to load them; the page itself asks
    # for the key and sends it with every API call.
    page = OpenRoutes(PROBE_PATHS | {"/"}, prefixes=("/static/",))
    app = create_service_app(settings, title="ChatQnA RAG gateway", lifespan=lifespan, registry=registry,
                             open_routes=page)
    app.add_middleware(SecurityHeadersMiddleware)
    app.include_router(gateway_router())
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
