"""One RAG question through the native stack (gateway -> embedding, gateway -> LLM microservice -> backend), every
service with LOG_FORMAT=json and an OTLP endpoint: the client's X-Request-ID comes back and is on each service's JSON
log lines, the spans of all of them reach the collector (a receiver started here) in ONE trace, and the log lines
written inside those spans name that trace."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import gateway_env
from tests.gateway.facts import documents
from tests.support.otlp import OTLPReceiver
from tests.support.servers import MODELS, RemoteServer, wait_until

REQUEST_ID = "rag-question-0042"
SERVICES = ("chatqna-gateway", "embedding", "llm", "ovgenai-server")


@pytest.fixture(scope="module")
def stack(default_model, tmp_path_factory):
    with OTLPReceiver() as receiver:
        # Spans leave in batches: a short delay so that the test's wait is short too.
        observed = {"LOG_FORMAT": "json", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                    "OTEL_BSP_SCHEDULE_DELAY": "200"}
        with (
            RemoteServer("ovgenai_server", ["--model", str(MODELS)], env=observed) as backend,
            RemoteServer("ovgenai_services.llm", env={**observed, "LLM_ENDPOINT": backend.url,
                                                   "LLM_MODEL": default_model},
                         health_path="/v1/health_check") as llm,
            RemoteServer("ovgenai_services.embedding", env={
                **observed, "EMBEDDING_MODEL_PATH": str(MODELS / "sentence-transformers/all-MiniLM-L6-v2")},
            ) as embedding,
            RemoteServer("ovgenai_services.gateway", env={**observed, **gateway_env(
                embedding.url, llm.url, tmp_path_factory.mktemp("gateway-data"))}) as gateway,
        ):
            files = [("files", (name, body.encode(), "text/plain")) for name, body in documents().items()]
            response = httpx.post(gateway.url + "/v1/dataprep/ingest", files=files, timeout=120)
            assert response.status_code == 200, response.text
            answer = httpx.post(gateway.url + "/v1/chatqna", headers={"X-Request-ID": REQUEST_ID}, timeout=120,
                                json={"messages": "Who discovered zephyrine?", "max_tokens": 16})
            assert answer.status_code == 200, answer.text
            assert answer.text.rstrip().endswith("data: [DONE]")
            servers = {"chatqna-gateway": gateway, "embedding": embedding, "llm": llm, "ovgenai-server": backend}
            yield answer, servers, receiver


def test_the_request_id_comes_back(stack):
    answer, _, _ = stack
    assert answer.headers["X-Request-ID"] == REQUEST_ID


def lines_with_the_request_id(server: RemoteServer) -> list[str]:
    """The service's log lines naming the question's request id, once there are any: the access line is written
    when the response has ended, which can be just after the client has read its end."""
    lines: list[str] = []

    def written() -> bool:
        lines[:] = [line for line in server.logs().splitlines() if REQUEST_ID in line]
        return bool(lines)

    wait_until(written, 30, 0.05, "a log line with the request id")
    return lines


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_logs_json_lines_with_the_request_id(stack, service):
    _, servers, _ = stack
    lines = lines_with_the_request_id(servers[service])
    records = [json.loads(line) for line in lines]  # each line one JSON object
    assert all(r["request_id"] == REQUEST_ID and r["level"] and r["logger"] for r in records), records
    # Python's log lines are JSON from the start, the first (where it listens) included; only native libraries print
    # text.
    started = [line for line in servers[service].logs().splitlines() if "listening on http" in line]
    assert started and all(json.loads(line)["logger"] == "ovgenai_common.app" for line in started), started


def question_root(spans):
    """The gateway's server span of the question, once received (None before)."""
    return next((s for s in spans if s.service == "chatqna-gateway" and s.kind == 2
                 and s.attributes.get("url.path") == "/v1/chatqna"), None)


def test_one_trace_spans_the_three_services(stack):
    _, _, receiver = stack

    def question_spans():
        spans = receiver.received()
        root = question_root(spans)
        if root is None:
            return []
        trace = [s for s in spans if s.trace_id == root.trace_id]
        return trace if {s.service for s in trace} >= set(SERVICES) else []

    wait_until(lambda: bool(question_spans()), 60, 0.2, "the question's spans from every service")
    spans = question_spans()
    names = {(s.service, s.name) for s in spans}
    assert {("chatqna-gateway", f"rag.{stage}") for stage in ("embed", "retrieve", "generate")} <= names, names
    assert ("llm", "POST /v1/chat/completions") in names, names
    backend = [s for s in spans if s.service == "ovgenai-server" and s.name == "POST /v1/chat/completions"]
    assert len(backend) == 1, names
    assert backend[0].attributes["gen_ai.usage.output_tokens"] > 0
    assert backend[0].attributes["ovgenai.decode_time_s"] >= 0
    # Each hop is a child of the caller's span: the LLM relay's server span is under the gateway's generate span.
    by_id = {s.span_id: s for s in spans}
    relay = next(s for s in spans if s.service == "llm" and s.kind == 2)
    assert by_id[relay.parent_id].name == "rag.generate"
    assert by_id[backend[0].parent_id].service == "llm"


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_logs_the_trace_its_lines_belong_to(stack, service):
    """A log line and its trace lead to each other: the JSON lines written while serving the question inside one of
    its spans carry the question's trace id, and a span id."""
    _, servers, receiver = stack
    wait_until(lambda: question_root(receiver.received()) is not None, 60, 0.2, "the question's root span")
    question = question_root(receiver.received()).trace_id
    records = [json.loads(line) for line in lines_with_the_request_id(servers[service])]
    traced = [r for r in records if r["trace_id"] is not None]
    assert traced, f"{service} wrote no line inside a span: {records}"
    assert {r["trace_id"] for r in traced} == {question}, records
    assert all(len(r["span_id"]) == 16 for r in traced), records
