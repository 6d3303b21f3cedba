"""The gateway's wiring: the upstreams it calls (a reranker only when one is configured), every route of the
routers' modules served, and the ingest route admitted by the ingest pool (a 429 with every place taken)."""

from __future__ import annotations

import httpx

from ovgenai_services.gateway.app import create_app, upstreams_of
from ovgenai_services.gateway.settings import GatewaySettings
from tests.gateway.fake_upstreams import EMBEDDING, LLM, FakeUpstreams

API = {"/health", "/v1/health_check", "/health/details", "/v1/chatqna", "/v1/chat/completions", "/v1/retrieve",
       "/v1/models", "/v1/responses", "/v1/responses/{response_id}", "/v1/dataprep/ingest", "/v1/dataprep/get",
       "/v1/dataprep/delete", "/v1/dataprep/indices"}


async def test_a_reranker_is_called_only_when_configured():
    transport = httpx.MockTransport(lambda _: httpx.Response(200))
    for settings, names in ((GatewaySettings(), {"embedding", "llm"}),
                            (GatewaySettings(rerank_endpoint="http://reranker:80"), {"embedding", "llm", "rerank"})):
        upstreams = upstreams_of(settings, transport)
        assert set(upstreams) == names
        for upstream in upstreams.values():
            await upstream.aclose()


async def test_every_route_is_served():
    app = create_app(GatewaySettings())
    assert set(app.openapi()["paths"]) == API
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        page, script = await http.get("/"), await http.get("/static/app.js")
    assert page.status_code == 200 and "<html" in page.text.lower() and script.status_code == 200


async def test_an_ingest_waits_for_a_place_or_is_refused(tmp_path):
    settings = GatewaySettings(data_dir=str(tmp_path), embedding_endpoint=EMBEDDING, llm_endpoint=LLM,
                               ingest_concurrency=1, ingest_bodies=1, ingest_queue=0)
    app = create_app(settings, transport=FakeUpstreams().transport())
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            async with app.state.ingest_pool.place():  # the one place taken, none to wait in
                busy = await http.post("/v1/dataprep/ingest", data={"text": ["Alpha."], "name": ["a.txt"]})
            free = await http.post("/v1/dataprep/ingest", data={"text": ["Alpha."], "name": ["a.txt"]})
    assert busy.status_code == 429 and busy.json()["error"]["code"] == "ingest_capacity"
    assert free.status_code == 200


async def test_the_pipeline_starts_without_langchain_warnings_where_no_proxy_is_set(monkeypatch, caplog, tmp_path):
    """The launcher and compose set no_proxy, which langchain-openai took for a proxy its own client's transport
    would hide, warning on every start; the gateway's client is its own, and the one it never calls is plain."""
    from langchain_openai.chat_models import _client_utils

    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    monkeypatch.setattr(_client_utils, "_proxy_env_warning_emitted", False)  # it warns once per process
    app = create_app(GatewaySettings(data_dir=str(tmp_path), embedding_endpoint=EMBEDDING, llm_endpoint=LLM),
                     transport=FakeUpstreams().transport())
    async with app.router.lifespan_context(app):
        pass
    assert not [record for record in caplog.records if record.name.startswith("langchain")], caplog.text
