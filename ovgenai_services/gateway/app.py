"""The gateway's app factory: the one place that reads the settings whole and hands each part the values it
needs. Its lifespan owns the upstream clients, the store, the pipeline and ingestion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry

from ovgenai_common.app import create_service_app
from ovgenai_common.response_store import ResponseStore
from ovgenai_common.security import PROBE_PATHS, OpenRoutes
from ovgenai_common.upstream import Upstream, openai_base

from . import dataprep
from .chroma import StoreLocation
from .embedding import Embedder, ServicePrompts, VectorSpace
from .headers import SecurityHeadersMiddleware
from .indices import Indices
from .ingestion.ingest import Ingestion, IngestLimits, recover, spool_root
from .ingestion.links import LinkFetcher, LinkLimits
from .ingestion.pool import IngestPool
from .metrics import IngestMetrics, RAGMetrics
from .rag import Prompting, RAGPipeline
from .rerank import Reranker
from .router import STATIC, router
from .settings import GatewaySettings
from .store import DocumentStore


def upstreams_of(settings: GatewaySettings,
                 transport: httpx.AsyncBaseTransport | None = None) -> dict[str, Upstream]:
    """The services the gateway calls, by what they do (`transport` replaces the network in tests)."""
    upstreams = {
        "embedding": Upstream("embedding service", settings.embedding_endpoint, api_key=settings.embedding_api_key,
                              timeout=settings.request_timeout, transport=transport),
        "llm": Upstream("LLM service", settings.llm_endpoint, api_key=settings.llm_api_key,
                        timeout=settings.request_timeout, transport=transport),
    }
    if settings.rerank_endpoint:
        upstreams["rerank"] = Upstream("rerank service", settings.rerank_endpoint, api_key=settings.rerank_api_key,
                                       timeout=settings.request_timeout, transport=transport)
    return upstreams


def store_of(settings: GatewaySettings, embedding: Upstream, metrics: IngestMetrics, index: str) -> DocumentStore:
    """The store, embedding through LangChain's OpenAI client on the embedding upstream's pooled client, questions
    and chunks each with their fields."""
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        base_url=openai_base(settings.embedding_endpoint),
        http_async_client=embedding.client,
        api_key=settings.embedding_api_key,
        model=settings.embedding_model,
        check_embedding_ctx_length=False,
        request_timeout=settings.request_timeout,
        max_retries=0,
    )
    location = StoreLocation(index, settings.vector_store, settings.data_dir, settings.chroma_host,
                             settings.chroma_port)
    space = VectorSpace(settings.embedding_model, settings.embedding_query_fields, settings.embedding_document_fields)
    prompts = ServicePrompts(embedding.client, settings.embedding_model)
    return DocumentStore(location, Embedder(embeddings, space, prompts), settings.embed_batch_size, metrics)


def indices_of(settings: GatewaySettings, embedding: Upstream, metrics: IngestMetrics) -> Indices:
    """The indices, each a store as store_of makes it; COLLECTION_NAME the default one."""
    return Indices(settings.collection, settings.max_indices,
                   lambda index: store_of(settings, embedding, metrics, index))


def rag_of(settings: GatewaySettings, store: DocumentStore, upstreams: dict[str, Upstream],
           metrics: RAGMetrics) -> RAGPipeline:
    """The pipeline, answering through LangChain's ChatOpenAI on the LLM upstream's pooled client."""
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        base_url=openai_base(settings.llm_endpoint),
        http_async_client=upstreams["llm"].client,
        api_key=settings.llm_api_key,
        model=settings.llm_model,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        timeout=settings.request_timeout,
        max_retries=0,
        stream_usage=True,  # the usage chunk, for stream_options.include_usage and the Responses API's usage
        # ChatOpenAI also builds a sync client, which the gateway never calls: without socket options of its own it
        # is a plain httpx client, rather than a custom transport that warned on every start wherever no_proxy is set
        # (the launcher and compose set it; langchain-openai counts it as a proxy that the transport would hide).
        http_socket_options=(),
    )
    reranker = Reranker(upstreams["rerank"], settings.request_timeout) if "rerank" in upstreams else None
    prompting = Prompting(settings.prompt_template, settings.history, settings.max_json_bytes)
    return RAGPipeline(store, llm, metrics, prompting, reranker)


def ingestion_of(settings: GatewaySettings, indices: Indices, pool: IngestPool) -> Ingestion:
    links = LinkFetcher(LinkLimits(settings.link_max_bytes, settings.link_timeout, settings.link_max_redirects,
                                   tuple(settings.link_allowed_networks)))
    limits = IngestLimits(spool_root(settings.data_dir), settings.max_upload_bytes, settings.max_html_bytes,
                          settings.max_parsed_bytes)
    return Ingestion(indices, links, pool, limits)


def create_app(settings: GatewaySettings, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    registry = CollectorRegistry()
    metrics = RAGMetrics(registry)
    ingest_metrics = IngestMetrics(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upstreams = upstreams_of(settings, transport)
        try:
            indices = indices_of(settings, upstreams["embedding"], ingest_metrics)
            # Before serving: documents a crash left partial are removed (or finished), spooled uploads swept. The
            # embedded store is this process's alone; a Chroma server's other replicas may be mid-ingest.
            stale = None if settings.vector_store == "embedded" else settings.stale_ingest_seconds
            await asyncio.to_thread(recover, indices, spool_root(settings.data_dir), stale)
            pool = IngestPool(settings.ingest_concurrency, settings.ingest_queue, settings.ingest_bodies,
                              settings.upload_pace, ingest_metrics)
            app.state.upstreams = upstreams
            app.state.indices = indices
            app.state.rag = rag_of(settings, indices.default, upstreams, metrics)
            app.state.responses = ResponseStore(settings.responses_store_size, settings.responses_store_ttl)
            app.state.ingest_pool = pool
            app.state.ingestion = ingestion_of(settings, indices, pool)
            try:
                yield
            finally:
                pool.shutdown()
        finally:
            for upstream in upstreams.values():
                await upstream.aclose()

    # The chat page and its files hold no data and a browser cannot send a key to load them; the page itself asks
    # for the key and sends it with every API call.
    page = OpenRoutes(PROBE_PATHS | {"/"}, prefixes=("/static/",))
    # Only ingestion takes uploads (up to MAX_REQUEST_BYTES); every other body is held to the JSON limit, whatever its
    # Content-Type says.
    app = create_service_app(settings, title="ChatQnA RAG gateway", service_name="chatqna-gateway",
                             lifespan=lifespan, registry=registry, open_routes=page,
                             upload_paths={dataprep.INGEST_PATH})
    app.add_middleware(SecurityHeadersMiddleware)
    app.include_router(router)
    app.include_router(dataprep.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
