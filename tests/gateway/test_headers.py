"""Security headers on every response of an app wrapped in the gateway's middleware (the page itself is checked in
a real browser by system/test_chat_page.py)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from ovgenai_services.gateway.headers import CONTENT_SECURITY_POLICY, SecurityHeadersMiddleware


def get(app: FastAPI, path: str) -> httpx.Response:
    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
            return await client.get(path)

    return asyncio.run(call())


def app_with_headers() -> FastAPI:
    app = FastAPI()
    app.add_middleware(SecurityHeadersMiddleware)

    @app.get("/page")
    async def page() -> dict:
        return {"ok": True}

    @app.get("/own-policy")
    async def own_policy() -> JSONResponse:
        return JSONResponse({}, headers={"Content-Security-Policy": "default-src 'none'"})

    return app


def test_every_response_carries_the_headers():
    app = app_with_headers()
    for path, status in (("/page", 200), ("/missing", 404), ("/openapi.json", 200)):
        response = get(app, path)
        assert response.status_code == status
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY and "default-src 'self'" in CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"


def test_a_route_may_set_a_stricter_policy_and_the_docs_load_their_cdn():
    app = app_with_headers()
    assert get(app, "/own-policy").headers["content-security-policy"] == "default-src 'none'"
    docs = get(app, "/docs")
    assert docs.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert docs.headers["x-frame-options"] == "DENY"
