"""What the routes depend on: the objects the app owns (its lifespan makes them), typed for `Depends`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ovgenai_common.errors import APIError, ErrorKind

from .service import EmbeddingService


def loaded_service(request: Request) -> EmbeddingService | None:
    """The service once its model is loaded; None before (the app starts with none)."""
    return request.app.state.service


async def get_service(request: Request) -> EmbeddingService:
    """Async though it awaits nothing: FastAPI runs a plain function dependency on a worker thread, a round trip
    that cost every request ~0.1 ms and a thread switch."""
    service = loaded_service(request)
    if service is None:
        raise APIError(ErrorKind.UNAVAILABLE, "The embedding model is loading.")
    return service


ServiceDep = Annotated[EmbeddingService, Depends(get_service)]
