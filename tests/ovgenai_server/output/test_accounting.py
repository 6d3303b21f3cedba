"""What a finished request leaves behind (output/accounting.py): its usage, its metrics (tokens, latencies, phases, one
success per choice by finish reason), its span's gen_ai attributes when traced, and one log line."""

from __future__ import annotations

import logging
import time

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from ovgenai_server.engine.contract.types import RequestTimings
from ovgenai_server.metrics import ServerMetrics
from ovgenai_server.output.accounting import record, usage

MODEL = {"model_name": "m"}


def metrics() -> tuple[ServerMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    return ServerMetrics(registry, list), registry


def test_usage_totals_prompt_and_completion():
    assert usage(7, 3) == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert usage(0, 0)["total_tokens"] == 0


def test_a_request_is_counted_once_with_each_choices_finish_reason():
    served, registry = metrics()
    started = time.perf_counter()
    record(served, "r1", "m", started, 0.25, usage(7, 3), ["stop", "length", None],
           RequestTimings(queue=0.5, prefill=1.0, decode=2.0))
    value = registry.get_sample_value
    assert (value("ovgenai:prompt_tokens_total", MODEL), value("ovgenai:generation_tokens_total", MODEL)) == (7, 3)
    successes = {reason: value("ovgenai:request_success_total", {**MODEL, "finished_reason": reason})
                 for reason in ("stop", "length")}
    assert successes == {"stop": 2, "length": 1}  # a choice without a reason counts as stopped
    assert value("ovgenai:time_to_first_token_seconds_sum", MODEL) == 0.25
    assert value("ovgenai:e2e_request_latency_seconds_count", MODEL) == 1
    assert [value(f"ovgenai:request_{phase}_time_seconds_sum", MODEL) for phase in ("queue", "prefill", "decode")] == [
        0.5, 1.0, 2.0]


def test_without_a_first_token_or_timings_those_are_not_observed():
    served, registry = metrics()
    record(served, "r2", "m", time.perf_counter(), None, usage(4, 0), ["abort"])
    value = registry.get_sample_value
    assert value("ovgenai:time_to_first_token_seconds_count", MODEL) is None  # never observed for the model
    assert value("ovgenai:request_queue_time_seconds_count", MODEL) is None
    assert value("ovgenai:e2e_request_latency_seconds_count", MODEL) == 1
    assert value("ovgenai:request_success_total", {**MODEL, "finished_reason": "abort"}) == 1


def test_one_log_line_per_request(caplog):
    served, _ = metrics()
    with caplog.at_level(logging.INFO, logger="ovgenai_server.requests"):
        record(served, "r3", "m", time.perf_counter(), 0.0125, usage(5, 2), ["stop", None])
    [line] = [r.getMessage() for r in caplog.records if r.name == "ovgenai_server.requests"]
    assert line.startswith("request r3 model=m prompt_tokens=5 completion_tokens=2 ttft_ms=12.5 duration_ms=")
    assert line.endswith("finish=stop,stop")


def test_a_traced_request_says_its_usage_and_phases_on_its_span():
    served, _ = metrics()
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("POST /v1/chat/completions") as span:
        record(served, "r4", "m", time.perf_counter(), 0.5, usage(9, 4), ["stop"],
               RequestTimings(queue=0.1, prefill=0.2, decode=0.3))
    attributes = dict(span.attributes)
    assert (attributes["gen_ai.request.model"], attributes["gen_ai.usage.input_tokens"],
            attributes["gen_ai.usage.output_tokens"]) == ("m", 9, 4)
    assert attributes["ovgenai.time_to_first_token_s"] == 0.5
    assert [attributes[f"ovgenai.{phase}_time_s"] for phase in ("queue", "prefill", "decode")] == [0.1, 0.2, 0.3]
    with tracer.start_as_current_span("untimed") as untimed:
        record(served, "r5", "m", time.perf_counter(), None, usage(1, 0), ["stop"])
    assert "ovgenai.time_to_first_token_s" not in untimed.attributes
    assert "ovgenai.queue_time_s" not in untimed.attributes
