"""An OTLP/HTTP trace receiver for tests: a tiny HTTP server on a free loopback port that decodes each export
(opentelemetry-proto's ExportTraceServiceRequest) into plain span records, as a collector would receive them."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.support.loopback_http import LoopbackHTTP, QuietHandler


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict


def _value(any_value) -> object:
    field = any_value.WhichOneof("value")
    return getattr(any_value, field) if field else None


def decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    str(resource.get("service.name")), span.name, span.trace_id.hex(), span.span_id.hex(),
                    span.parent_span_id.hex(), span.kind, {a.key: _value(a.value) for a in span.attributes},
                ))
    return spans


class OTLPReceiver:
    """`endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT takes; `spans` what has arrived at its /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(404)
                    return
                spans = decode(body)
                with receiver.lock:
                    receiver.spans.extend(spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.http = LoopbackHTTP(Handler)
        self.endpoint = self.http.url

    def received(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def __enter__(self) -> OTLPReceiver:
        return self

    def __exit__(self, *exc) -> None:
        self.http.stop()
