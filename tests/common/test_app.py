"""The shared service app records no OpenTelemetry data, even where a process has a tracer provider set up."""

from __future__ import annotations

from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from microservices.common.app import create_service_app
from microservices.common.settings import ServiceSettings


def test_requests_make_no_spans(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    app = create_service_app(ServiceSettings(), title="t")

    @app.get("/v1/ping")
    def ping() -> dict:
        return {"ok": True}

    with TestClient(app) as client:
        assert client.get("/v1/ping").json() == {"ok": True}
        assert client.get("/live").status_code == 200
    assert exporter.get_finished_spans() == ()
