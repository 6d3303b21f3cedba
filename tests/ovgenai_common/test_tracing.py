"""Tracing is opt-in (ovgenai_common/tracing.py): without an OTLP endpoint no span is made, neither the
request's nor a stage's, even when a library configured a global tracer provider (chromadb brings the SDK along).
Run in a fresh interpreter: a process has one global tracer provider, and this test sets it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from ovgenai_common.tracing import fastapi_telemetry, traces_endpoint

SCRIPT = textwrap.dedent("""
    import asyncio, httpx
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from ovgenai_common.app import create_service_app
    from ovgenai_common.settings import ServiceSettings
    from ovgenai_common.tracing import span

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # as a library might
    app = create_service_app(ServiceSettings(otel_exporter_otlp_endpoint={endpoint!r}), title="t")

    @app.get("/stage")
    async def stage() -> dict:
        with span("rag.embed"):
            return {{}}

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            assert (await client.get("/stage")).status_code == 200
    asyncio.run(main())
    print(sorted(s.name for s in exporter.get_finished_spans()))
""")


def spans_made(endpoint: str | None) -> str:
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(endpoint=endpoint)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_fastapi_traces_only_on_our_provider():
    assert fastapi_telemetry(None)["tracing"] is False
    on = fastapi_telemetry(object())
    assert on["tracing"] is True and on["metrics"] is False and on["exclude"]({"path": "/health"})
    assert not on["exclude"]({"path": "/v1/chat/completions"})


def test_the_traces_url_is_under_the_collectors_base():
    assert traces_endpoint("http://collector:4318/") == "http://collector:4318/v1/traces"
