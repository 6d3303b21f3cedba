"""Opt-in OpenTelemetry tracing: with an OTLP endpoint set (OTEL_EXPORTER_OTLP_ENDPOINT), each service sends its
spans there over OTLP/HTTP; without one no provider is made, no exporter exists and nothing reaches the network.

What is traced: every request a service serves (FastAPI's own server span, which continues the caller's
`traceparent`), the gateway's stages (embed, retrieve, rerank, generate) and the backend's generation, each a span of
its own; every call to another service carries the current `traceparent` (upstream.py). Spans are made per request
or per stage, never per token, and exported in batches from a background thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from opentelemetry import propagate, trace

logger = logging.getLogger(__name__)

TRACER_NAME = "ovgenai"
# Ours, set once when the service's app is made with an endpoint; the global provider is left alone, so that a
# library which configures one (chromadb can) never receives our spans, and without an endpoint no span is made.
_tracer: trace.Tracer | None = None
# Probes and scrapes are not traced: they would bury the requests among themselves.
UNTRACED_PATHS = frozenset({"/health", "/live", "/metrics", "/v1/health_check"})


def traces_endpoint(endpoint: str) -> str:
    """OTLP/HTTP's traces URL under the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is defined."""
    return endpoint.rstrip("/") + "/v1/traces"


def configure_tracing(endpoint: str | None, service_name: str) -> Any | None:
    """The process's tracer provider exporting to `endpoint` (None, and nothing made, without one)."""
    global _tracer
    if not endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_endpoint(endpoint))))
    _tracer = provider.get_tracer(TRACER_NAME)
    logger.info("tracing to %s as %s", traces_endpoint(endpoint), service_name)
    return provider


def fastapi_telemetry(provider: Any | None) -> dict[str, Any]:
    """FastAPI's `telemetry` argument: server spans on our provider, or everything off without one (FastAPI would
    otherwise instrument requests whenever some library configured a global provider)."""
    off = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False, "auto_configure": False}
    if provider is None:
        return off
    return {**off, "tracing": True, "tracer_provider": provider,
            "exclude": lambda scope: scope.get("path") in UNTRACED_PATHS}


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span for one stage of a request, current while the block runs (a non-recording one without tracing)."""
    if _tracer is None:
        yield trace.INVALID_SPAN
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


def start_span(name: str) -> Any:
    """A span started now and ended by the caller, for a stage that outlives the block that starts it (a stream)."""
    return _tracer.start_span(name) if _tracer is not None else trace.INVALID_SPAN


def inject_trace_context(headers: MutableMapping[str, str]) -> None:
    """The current span's `traceparent` (and baggage) into an outgoing request's headers; nothing without one."""
    propagate.inject(headers)
