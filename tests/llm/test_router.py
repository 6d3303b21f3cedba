"""The LLM microservice's routes: every body parsed as JSON within the shared limits, and failures of the backend
said without its address (clients need not learn the internal network)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import httpx

from microservices.llm.app import create_app
from microservices.llm.settings import LLMSettings

BACKEND = "http://10.1.2.3:8008"


@asynccontextmanager
async def llm(backend):
    app = create_app(LLMSettings(llm_endpoint=BACKEND), transport=httpx.MockTransport(backend))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            yield http


async def test_deep_json_is_refused_whatever_its_content_type():
    """It parses every body as JSON itself (OPEA's clients do not always say application/json)."""
    sent = []
    async with llm(lambda request: sent.append(request) or httpx.Response(200, json={})) as http:
        for content_type in ("text/plain", "application/json"):
            deep = await http.post("/v1/chat/completions", headers={"Content-Type": content_type},
                                   content=b'{"messages": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")
            assert deep.status_code == 400 and deep.json()["error"]["code"] == "json_too_deep", deep.text
    assert not sent  # nothing reached the backend


async def test_an_unreachable_backend_is_a_503_that_does_not_name_it(caplog):
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with llm(refuse) as http:
        for stream in (False, True):
            reply = await http.post("/v1/chat/completions", json={"model": "m", "messages": "hi", "stream": stream})
            assert reply.status_code == 503
            assert reply.json()["error"]["message"] == "The backend is unreachable (ConnectError)."
        health = await http.get("/v1/health_check")
        assert health.status_code == 503 and "unreachable" in health.text
        for answer in (reply, health):
            assert "10.1.2.3" not in answer.text
    assert BACKEND in caplog.text  # the operator still learns where it looked
