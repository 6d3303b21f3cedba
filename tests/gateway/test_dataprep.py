"""Ingest's form fields within the shared JSON limits: link_list is JSON in a multipart field, which the body
middleware does not parse, so its depth is checked where it is read."""

from __future__ import annotations

import httpx

from microservices.gateway.app import create_app
from microservices.gateway.settings import GatewaySettings


async def test_a_deeply_nested_link_list_is_a_400(tmp_path):
    app = create_app(GatewaySettings(data_dir=str(tmp_path)))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            reply = await http.post("/v1/dataprep/ingest", data={"link_list": "[" * 50_000 + "]" * 50_000})
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "json_too_deep" and reply.json()["error"]["param"] == "link_list"
