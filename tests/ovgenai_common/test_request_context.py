"""Request ids (ovgenai_common/request_context.py): the client's plain-token id or a new one, echoed in the response,
passed on with every upstream call, and on every log line written meanwhile. The upstream is httpx's MockTransport:
what matters is what the service sends it."""

from __future__ import annotations

import json
import logging
import re

import httpx
from fastapi import FastAPI

from ovgenai_common.app import create_service_app
from ovgenai_common.logs import RequestIdFilter, formatter
from ovgenai_common.request_context import REQUEST_ID_HEADER
from ovgenai_common.settings import ServiceSettings
from ovgenai_common.upstream import Upstream

MADE = re.compile(r"[0-9a-f]{32}")


def service(upstream: Upstream) -> FastAPI:
    app = create_service_app(ServiceSettings(), title="t")

    @app.get("/ask")
    async def ask() -> dict:
        logging.getLogger("test.ask").info("asking upstream")
        await upstream.request("GET", "/v1/models")
        return {}

    return app


async def test_the_id_is_the_clients_or_a_new_one_echoed_and_passed_upstream():
    sent: list[str | None] = []
    upstream = Upstream("LLM service", "http://10.9.8.7:6000", transport=httpx.MockTransport(
        lambda request: sent.append(request.headers.get(REQUEST_ID_HEADER)) or httpx.Response(200, json={})))
    transport = httpx.ASGITransport(app=service(upstream))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        given = await client.get("/ask", headers={REQUEST_ID_HEADER: "req-42"})
        absent = await client.get("/ask")
        odd = await client.get("/ask", headers={REQUEST_ID_HEADER: "a b\tc"})  # not a plain token: replaced
    await upstream.aclose()
    assert given.headers[REQUEST_ID_HEADER] == "req-42"
    assert MADE.fullmatch(absent.headers[REQUEST_ID_HEADER])
    assert MADE.fullmatch(odd.headers[REQUEST_ID_HEADER])
    assert absent.headers[REQUEST_ID_HEADER] != odd.headers[REQUEST_ID_HEADER]
    assert sent == ["req-42", absent.headers[REQUEST_ID_HEADER], odd.headers[REQUEST_ID_HEADER]]


async def test_a_refused_request_also_gets_its_id():
    """The id middleware is outermost: a request the key check refuses still has an id to quote."""
    app = create_service_app(ServiceSettings(api_key="k"), title="t")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        response = await client.get("/metrics", headers={REQUEST_ID_HEADER: "refused-1"})
    assert response.status_code == 401
    assert response.headers[REQUEST_ID_HEADER] == "refused-1"


async def test_json_log_lines_carry_the_request_id():
    """LOG_FORMAT=json: each line one JSON object; lines written while a request is served name its id, among them
    the access line written when it ends."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(formatter("json"))
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    upstream = Upstream("LLM service", "http://10.9.8.7:6000",
                        transport=httpx.MockTransport(lambda _: httpx.Response(200, json={})))
    try:
        transport = httpx.ASGITransport(app=service(upstream))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            await client.get("/ask", headers={REQUEST_ID_HEADER: "logged-7"})
        logging.getLogger("test.outside").info("no request here")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        await upstream.aclose()
    records = [json.loads(line) for line in lines]
    assert all({"time", "level", "logger", "message", "request_id"} <= set(r) for r in records), records
    by_message = {r["message"]: r for r in records}
    assert by_message["asking upstream"]["request_id"] == "logged-7"
    access = [r for r in records if r["logger"] == "ovgenai.access"]
    assert [(r["message"].split()[:3], r["request_id"]) for r in access] == [(["GET", "/ask", "200"], "logged-7")]
    assert by_message["no request here"]["request_id"] is None
    assert all(r["trace_id"] is None and r["span_id"] is None for r in records)  # no tracing here


async def test_answers_are_counted_by_status_and_error_kind_probes_left_out():
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    app = create_service_app(ServiceSettings(api_key="k"), title="t", registry=registry)

    def count(status: str, kind: str) -> float:
        return registry.get_sample_value("http_responses_total", {"status": status, "kind": kind}) or 0.0

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        await client.get("/openapi.json")  # no key: refused by the key check, before any route
        await client.get("/openapi.json", headers={"Authorization": "Bearer k"})
        await client.get("/live")
    assert count("401", "authentication_error") == 1
    assert count("200", "ok") == 1  # /live is a probe: not counted
