"""The shared readiness routes: /health and OPEA's /v1/health_check answer from one check and never disagree."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from ovgenai_common.health import Readiness, health_router


def client_for(readiness: Readiness, **options) -> httpx.AsyncClient:
    async def check(_request) -> Readiness:
        return readiness

    app = FastAPI()
    app.include_router(health_router("demo", check, **options))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_ready_service_answers_200_on_both_routes():
    async with client_for(Readiness(True, opea={"Model": "m"}, health={"dependencies": {"a": "ok"}})) as client:
        health, opea = await client.get("/health"), await client.get("/v1/health_check")
    assert health.status_code == opea.status_code == 200
    assert health.json() == {"status": "ok", "dependencies": {"a": "ok"}}
    assert list(opea.json()) == ["Service Title", "Version", "Service Description", "Model"]
    assert opea.json()["Service Title"] == "opea_service@demo/MicroService"


@pytest.mark.parametrize("opea_version", [True, False])
async def test_unready_service_answers_503_with_the_reason_on_both_routes(opea_version):
    readiness = Readiness(False, "backend is down", opea={"Backend": "backend is down"})
    async with client_for(readiness, opea_version=opea_version) as client:
        health, opea = await client.get("/health"), await client.get("/v1/health_check")
    assert health.status_code == opea.status_code == 503
    assert health.json()["error"] == {"message": "backend is down", "type": "unavailable_error", "param": None,
                                      "code": 503}
    assert opea.json()["Backend"] == "backend is down"
    assert ("Version" in opea.json()) is opea_version
