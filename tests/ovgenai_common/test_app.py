"""The shared service app records no OpenTelemetry data, even where a process has a tracer provider set up."""

from __future__ import annotations

from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ovgenai_common.app import create_service_app
from ovgenai_common.settings import ServiceSettings


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


def test_streaming_endpoints_document_server_sent_events():
    """A `stream: true` answer is text/event-stream; every service's OpenAPI document says so (the fuzzer checks
    each response's content type against it)."""
    from ovgenai_server.app import create_app as backend_app
    from ovgenai_server.settings import BackendSettings
    from ovgenai_services.gateway.app import create_app as gateway_app
    from ovgenai_services.gateway.settings import GatewaySettings
    from ovgenai_services.llm.app import create_app as llm_app
    from ovgenai_services.llm.settings import LLMSettings
    from tests.support.fake_engine import fake_model

    documents = {
        "backend": (backend_app(BackendSettings(), [fake_model()]).openapi(),
                    ["/v1/chat/completions", "/v1/completions", "/v3/chat/completions", "/v3/completions"]),
        "llm": (llm_app(LLMSettings()).openapi(), ["/v1/chat/completions", "/v1/completions"]),
        "gateway": (gateway_app(GatewaySettings()).openapi(), ["/v1/chatqna", "/v1/chat/completions"]),
    }
    for service, (document, paths) in documents.items():
        for path in paths:
            content = document["paths"][path]["post"]["responses"]["200"]["content"]
            assert {"application/json", "text/event-stream"} <= set(content), (service, path)
