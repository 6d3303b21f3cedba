"""The gateway's app factory: LangChain clients and the store live as long as the app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry, Histogram

from ovgenai_common.app import create_service_app

from .rag import RAGPipeline
from .router import STATIC, gateway_router
from .settings import GatewaySettings
from .store import DocumentStore

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class RAGMetrics:
    def __init__(self, registry: CollectorRegistry):
        def histogram(name: str, text: str) -> Histogram:
            return Histogram(f"rag_{name}_seconds", text, buckets=_BUCKETS, registry=registry)

        self.embed = histogram("embed", "Embedding the question.")
        self.retrieve = histogram("retrieve", "Vector search.")
        self.first_token = histogram("first_token", "Request arrival to the LLM's first token.")
        self.total = histogram("total", "Request arrival to the end of the answer.")


class DependencyProbe:
    """Health of a dependency: its OPEA /v1/health_check, or /health."""

    def __init__(self, client: httpx.AsyncClient):
        self.client = client

    async def check(self, base_url: str) -> tuple[bool, str]:
        base = base_url.rstrip("/").removesuffix("/v1")
        try:
            response = await self.client.get(base + "/v1/health_check", timeout=3)
            if response.status_code == 404:
                response = await self.client.get(base + "/health", timeout=3)
        except httpx.HTTPError as error:
            return False, f"unreachable at {base} ({type(error).__name__})"
        return (True, "ok") if response.status_code == 200 else (False, f"{base} answered {response.status_code}")


def build_rag(settings: GatewaySettings, metrics: RAGMetrics) -> RAGPipeline:
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
    return RAGPipeline(settings, DocumentStore(settings, embeddings), llm, metrics)


def create_app(settings: GatewaySettings) -> FastAPI:
    registry = CollectorRegistry()
    metrics = RAGMetrics(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.rag = build_rag(settings, metrics)
        async with httpx.AsyncClient() as client:
            app.state.probes = DependencyProbe(client)
            yield

    app = create_service_app(settings, title="ChatQnA RAG gateway", lifespan=lifespan, registry=registry)
    app.include_router(gateway_router())
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
