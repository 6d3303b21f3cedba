"""The shared readiness routes: /health and OPEA's /v1/health_check answer from one check and never disagree, say
only up or down (they are open to anyone), and /health/details, which needs the key, says the rest."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from ovgenai_common.app import create_service_app
from ovgenai_common.health import DETAILS_PATH, NOT_READY, Readiness, health_router
from ovgenai_common.settings import ServiceSettings

OPEA = ["Service Title", "Version", "Service Description"]


def client_for(readiness: Readiness, app: FastAPI | None = None, **options) -> httpx.AsyncClient:
    async def check(_request) -> Readiness:
        return readiness

    app = app or FastAPI()
    app.include_router(health_router("demo", check, **options))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_ready_service_answers_200_on_every_route_and_details_only_on_its_own():
    readiness = Readiness(True, opea={"Model": "m"}, details={"dependencies": {"a": "ok"}})
    async with client_for(readiness) as client:
        health, opea, details = [await client.get(path) for path in ("/health", "/v1/health_check", DETAILS_PATH)]
    assert health.status_code == opea.status_code == details.status_code == 200
    assert health.json() == {"status": "ok"}
    assert list(opea.json()) == OPEA and opea.json()["Service Title"] == "opea_service@demo/MicroService"
    assert details.json() == {"status": "ok", "Model": "m", "dependencies": {"a": "ok"}}


@pytest.mark.parametrize("opea_version", [True, False])
async def test_unready_service_answers_503_and_says_why_only_in_the_details(opea_version):
    readiness = Readiness(False, "backend is down", details={"backend": "unreachable"})
    async with client_for(readiness, opea_version=opea_version) as client:
        health, opea, details = [await client.get(path) for path in ("/health", "/v1/health_check", DETAILS_PATH)]
    assert health.status_code == opea.status_code == details.status_code == 503
    assert health.json()["error"] == {"message": NOT_READY, "type": "unavailable_error", "param": None, "code": 503}
    assert list(opea.json()) == (OPEA if opea_version else ["Service Title", "Service Description"])
    assert details.json() == {"status": "unavailable", "reason": "backend is down", "backend": "unreachable"}


async def test_the_details_need_the_key_and_the_probes_do_not():
    app = create_service_app(ServiceSettings(api_key="secret"), title="demo")
    async with client_for(Readiness(True, details={"chunks": 3}), app) as client:
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/v1/health_check")).status_code == 200
        assert (await client.get(DETAILS_PATH)).status_code == 401
        keyed = await client.get(DETAILS_PATH, headers={"Authorization": "Bearer secret"})
    assert keyed.json() == {"status": "ok", "chunks": 3}
