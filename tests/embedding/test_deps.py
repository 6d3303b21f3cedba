"""What the embedding routes depend on: the service from app.state once its model is loaded, and until then none
(readiness says "loading") or, for a route that needs it, a 503."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.embedding.deps import get_service, loaded_service


def request(service):
    return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(service=service)))


async def test_before_the_model_has_loaded_a_route_that_needs_it_is_503():
    assert loaded_service(request(None)) is None
    with pytest.raises(APIError, match="The embedding model is loading.") as refused:
        await get_service(request(None))
    assert refused.value.kind is ErrorKind.UNAVAILABLE


async def test_once_loaded_the_routes_get_the_service():
    service = object()
    assert loaded_service(request(service)) is service and await get_service(request(service)) is service
