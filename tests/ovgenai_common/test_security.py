"""Who may call a service: the API key on every route but the probes (TEI's routes, /metrics, /docs and
/openapi.json included); without a key, the Host and Origin rules; the warning for an exposed service."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest
from fastapi import FastAPI

from ovgenai_common.app import create_service_app, run_app
from ovgenai_common.security import PROBE_PATHS, OpenRoutes, exposure_warning, host_name, is_loopback
from ovgenai_common.settings import ServiceSettings

KEY = {"Authorization": "Bearer s3cret"}


def service(**values) -> FastAPI:
    app = create_service_app(ServiceSettings(**values), title="t")

    for path in ("/v1/embeddings", "/embed", "/rerank", "/v3/chat/completions", "/predictions/m"):
        app.post(path)(lambda: {"ok": True})
    for path in ("/health", "/v1/health_check", "/ping", "/v2/health/live", "/v2/health/ready", "/v1/models"):
        app.get(path)(lambda: {"ok": True})
    return app


def client(app: FastAPI, host: str = "127.0.0.1:8000", **kwargs) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://{host}", **kwargs)


# --- the API key ------------------------------------------------------------------------------------------------

PROTECTED = [("POST", "/v1/embeddings"), ("POST", "/embed"), ("POST", "/rerank"), ("POST", "/v3/chat/completions"),
             ("POST", "/predictions/m"), ("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/docs"),
             ("GET", "/openapi.json"), ("GET", "/redoc"), ("GET", "/no/such/route")]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
async def test_the_key_guards_every_route_but_the_probes(method, path):
    async with client(service(api_key="s3cret")) as http:
        refused = await http.request(method, path)
        assert refused.status_code == 401, path
        assert refused.json()["error"] == {"message": "Invalid or missing API key.", "type": "authentication_error",
                                           "param": None, "code": "invalid_api_key"}
        assert (await http.request(method, path, headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await http.request(method, path, headers=KEY)).status_code in (200, 404)


async def test_the_key_may_come_as_anthropics_sdk_sends_it():
    async with client(service(api_key="s3cret")) as http:
        assert (await http.get("/v1/models", headers={"X-Api-Key": "s3cret"})).status_code == 200
        assert (await http.get("/v1/models", headers={"X-Api-Key": "wrong"})).status_code == 401
        # Both sent: the bearer token is the one checked.
        both = {"X-Api-Key": "s3cret", "Authorization": "Bearer wrong"}
        assert (await http.get("/v1/models", headers=both)).status_code == 401


@pytest.mark.parametrize("path", sorted(PROBE_PATHS))
async def test_probes_stay_open_with_a_key(path):
    async with client(service(api_key="s3cret")) as http:
        assert (await http.get(path)).status_code == 200


async def test_the_gateway_page_loads_without_the_key_and_its_api_does_not():
    from ovgenai_services.gateway.app import create_app
    from ovgenai_services.gateway.settings import GatewaySettings

    async with client(create_app(GatewaySettings(api_key="s3cret"))) as http:
        assert (await http.get("/")).status_code == 200
        assert (await http.get("/static/app.js")).status_code == 200
        for path in ("/v1/dataprep/get", "/metrics", "/openapi.json", "/docs"):
            assert (await http.get(path)).status_code == 401, path
        assert (await http.post("/v1/dataprep/ingest", files={"files": ("a.txt", b"x")})).status_code == 401


async def test_the_embedding_service_guards_teis_routes():
    from ovgenai_services.embedding.app import create_app
    from ovgenai_services.embedding.settings import EmbeddingSettings

    async with client(create_app(EmbeddingSettings(api_key="s3cret"))) as http:  # no model: the lifespan is not run
        for path in ("/embed", "/rerank", "/v1/rerank", "/v1/embeddings"):
            assert (await http.post(path, json={"inputs": "x"})).status_code == 401, path


async def test_the_torchserve_fronts_management_and_metrics_ports_need_the_key():
    from ovgenai_server.app import create_app
    from ovgenai_server.torchserve.http import management_app, metrics_app
    from ovgenai_server.torchserve.settings import TorchServeSettings
    from tests.support.fake_engine import fake_model

    settings = TorchServeSettings(api_key="s3cret")
    backend = create_app(settings.backend(), [fake_model()])
    async with client(management_app(backend.state.server, settings)) as http:
        assert (await http.get("/models")).status_code == 401
        assert (await http.get("/ping")).status_code == 200
    async with client(metrics_app(backend.state.registry, settings)) as http:
        assert (await http.get("/metrics")).status_code == 401
        metrics = await http.get("/metrics", headers=KEY)
        assert metrics.status_code == 200 and "ovgenai" in metrics.text


# --- without a key: Host and Origin -------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "192.168.1.20:8000",
                                  "llm:9000", "app.localhost", "LOCALHOST"])
async def test_hosts_that_cannot_be_rebound_are_served(host):
    async with client(service(), host) as http:
        assert (await http.get("/v1/models")).status_code == 200
        assert (await http.post("/v1/embeddings")).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io", "localhost.evil.example"])
async def test_other_names_are_refused_as_dns_rebinding(host):
    async with client(service(), host) as http:
        for response in (await http.get("/v1/models"), await http.post("/v1/embeddings")):
            assert response.status_code == 403
            assert response.json()["error"]["type"] == "permission_error"
            assert response.json()["error"]["code"] == "host_not_allowed"
        assert (await http.get("/health")).status_code == 200  # probes: whatever name the prober uses


async def test_allowed_hosts_and_the_bound_name_are_served():
    app = service(allowed_hosts="chat.example.com, *.corp.example", host="gpu-box.lan")
    for host in ("chat.example.com", "a.corp.example:8888", "gpu-box.lan:8000"):
        async with client(app, host) as http:
            assert (await http.get("/v1/models")).status_code == 200, host
    async with client(app, "corp.example") as http:
        assert (await http.get("/v1/models")).status_code == 403
    async with client(service(allowed_hosts="*"), "anything.example") as http:
        assert (await http.get("/v1/models")).status_code == 200


@pytest.mark.parametrize(("origin", "allowed"), [
    ("http://127.0.0.1:8000", True),  # the page the service itself serves
    ("http://localhost:5173", True),  # another page of this machine
    ("http://evil.example", False),
    ("null", False),  # sandboxed frames and file:// pages
    ("http://127.0.0.1.evil.example", False),
])
async def test_browsers_cross_site_writes_are_refused(origin, allowed):
    async with client(service()) as http:
        write = await http.post("/v1/embeddings", headers={"Origin": origin})
        assert write.status_code == (200 if allowed else 403)
        if not allowed:
            assert write.json()["error"]["code"] == "cross_site_request"
        read = await http.get("/v1/models", headers={"Origin": origin})
        assert read.status_code == 200  # the browser does not let that page read the answer


async def test_clients_without_origin_and_a_trusted_name_pass():
    async with client(service()) as http:
        assert (await http.post("/v1/embeddings")).status_code == 200  # curl, the SDKs, other services
    async with client(service(allowed_hosts="chat.example.com"), "127.0.0.1:8888") as http:  # behind a proxy
        assert (await http.post("/v1/embeddings", headers={"Origin": "https://chat.example.com"})).status_code == 200


async def test_with_a_key_host_and_origin_are_left_to_the_key():
    async with client(service(api_key="s3cret"), "evil.example") as http:
        assert (await http.post("/v1/embeddings", headers={**KEY, "Origin": "http://evil.example"})).status_code == 200


# --- CORS: pages on the origins ALLOWED_ORIGINS lists ----------------------------------------------------------

UI = "http://ui.example:5173"  # e.g. OPEA's chat UI, served from another host and port
PREFLIGHT = {"Origin": UI, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}


@pytest.mark.parametrize("api_key", [None, "s3cret"])
async def test_a_listed_origin_gets_its_preflight_answered_without_the_key(api_key):
    """Browsers send no key with a preflight: it is answered before the key check, and names what the page may do."""
    async with client(service(api_key=api_key, allowed_origins=f"{UI},https://other.example")) as http:
        answer = await http.options("/v1/embeddings", headers=PREFLIGHT)
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == UI
        assert "POST" in answer.headers["access-control-allow-methods"]
        assert answer.headers["access-control-allow-headers"] == "authorization, content-type"
        refused = await http.options("/v1/embeddings", headers={**PREFLIGHT, "Origin": "http://evil.example"})
        assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers


async def test_a_listed_origin_reads_the_answers_and_others_do_not():
    async with client(service(api_key="s3cret", allowed_origins=UI)) as http:
        answer = await http.post("/v1/embeddings", headers={**KEY, "Origin": UI})
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == UI
        assert "x-request-id" in answer.headers["access-control-expose-headers"].lower()
        refused = await http.post("/v1/embeddings", headers={"Origin": UI})  # the key is still required ...
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == UI  # ... and readable
        other = await http.post("/v1/embeddings", headers={**KEY, "Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers  # the browser keeps it from that page


async def test_without_a_key_a_listed_origin_passes_the_cross_site_check():
    async with client(service(allowed_origins=UI)) as http:
        write = await http.post("/v1/embeddings", headers={"Origin": UI})
        assert write.status_code == 200 and write.headers["access-control-allow-origin"] == UI
        refused = await http.post("/v1/embeddings", headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers


async def test_no_origin_is_allowed_by_default():
    async with client(service()) as http:
        answer = await http.options("/v1/embeddings", headers=PREFLIGHT)
        assert answer.status_code == 405 and "access-control-allow-origin" not in answer.headers
        assert "access-control-allow-origin" not in (await http.get("/v1/models", headers={"Origin": UI})).headers


async def test_any_origin_with_a_key():
    async with client(service(api_key="s3cret", allowed_origins="*")) as http:
        answer = await http.get("/v1/models", headers={**KEY, "Origin": UI})
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "*"


# --- exposure ----------------------------------------------------------------------------------------------------


def test_services_listen_on_loopback_unless_told_otherwise():
    from ovgenai_services.stack.services import StackSettings

    assert ServiceSettings().host == "127.0.0.1" and StackSettings().host == "127.0.0.1"


@pytest.mark.parametrize(("host", "api_key", "warns"), [
    ("0.0.0.0", None, True), ("::", "", True), ("10.0.0.5", None, True),
    ("0.0.0.0", "k", False), ("127.0.0.1", None, False), ("localhost", None, False), ("::1", None, False),
])
def test_an_exposed_service_without_a_key_warns_at_start(monkeypatch, caplog, host, api_key, warns):
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda _server, **_sockets: None)
    with caplog.at_level(logging.WARNING, logger="ovgenai_common.app"):
        run_app(FastAPI(), ServiceSettings(host=host, api_key=api_key), sock=socket.socket())
    assert ("without an API key" in caplog.text) == warns
    assert (exposure_warning(host, api_key) is not None) == warns


def test_the_pages_folder_opens_no_other_route():
    page = OpenRoutes(PROBE_PATHS | {"/"}, prefixes=("/static/",))
    assert "/static/app.js" in page and "/" in page and "/health" in page
    assert "/static/../v1/dataprep/get" not in page and "/v1/dataprep/get" not in page and "/static" not in page


def test_host_names_are_read_as_browsers_send_them():
    assert host_name("Example.COM:8080") == "example.com"
    assert host_name("[::1]:8000") == "::1" and is_loopback("::1")
    assert host_name("example.com.") == "example.com"
    assert not is_loopback("localhost.evil.example")
