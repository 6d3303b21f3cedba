"""What the routes depend on: the objects the app owns (its lifespan makes them), typed for `Depends`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ovgenai_common.clients import client_of
from ovgenai_common.response_store import ResponseStore
from ovgenai_common.upstream import Upstream

from .indices import Indices
from .ingestion.ingest import Ingestion
from .ingestion.pool import IngestPool
from .rag import RAGPipeline
from .settings import GatewaySettings


def get_settings(request: Request) -> GatewaySettings:
    return request.app.state.settings


def get_rag(request: Request) -> RAGPipeline:
    return request.app.state.rag


def get_indices(request: Request) -> Indices:
    return request.app.state.indices


def get_ingestion(request: Request) -> Ingestion:
    return request.app.state.ingestion


def get_ingest_pool(request: Request) -> IngestPool:
    return request.app.state.ingest_pool


def get_upstreams(request: Request) -> dict[str, Upstream]:
    """The services the gateway calls, by what they do: embedding, llm and (when configured) rerank."""
    return request.app.state.upstreams


def get_responses(request: Request) -> ResponseStore:
    return request.app.state.responses


SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]
RagDep = Annotated[RAGPipeline, Depends(get_rag)]
IndicesDep = Annotated[Indices, Depends(get_indices)]
IngestionDep = Annotated[Ingestion, Depends(get_ingestion)]
ResponsesDep = Annotated[ResponseStore, Depends(get_responses)]
ClientDep = Annotated[str, Depends(client_of)]
