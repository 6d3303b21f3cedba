"""A request's per-stage timings: each stage observed into its histogram as it ends, a failed stage not recorded,
and the report in milliseconds with null for the stages the request did not go through."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from ovgenai_services.gateway.metrics import STAGES, IngestMetrics, RAGMetrics, Timings


def observed(registry: CollectorRegistry, name: str) -> float:
    return registry.get_sample_value(f"rag_{name}_seconds_count") or 0.0


def test_stages_are_observed_and_reported_in_milliseconds():
    registry = CollectorRegistry()
    timings = Timings(RAGMetrics(registry))
    with timings.stage("embed"):
        pass
    timings.record("retrieve", 0.01234)
    with pytest.raises(RuntimeError), timings.stage("rerank"):
        raise RuntimeError("the reranker failed")
    timings.first_token(timings.started)
    report = timings.finish()
    assert set(report) == {f"{stage}_ms" for stage in STAGES}
    assert report["retrieve_ms"] == 12.3 and report["rerank_ms"] is None and report["total_ms"] is not None
    assert [observed(registry, stage) for stage in STAGES] == [1, 1, 0, 1, 1]
    assert observed(registry, "first_token") == 1


def test_ingest_metrics_are_named_as_the_dashboard_reads_them():
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry)
    metrics.running.set(2)
    metrics.refused.inc()
    metrics.chunks.inc(5)
    assert registry.get_sample_value("ingest_running") == 2
    assert registry.get_sample_value("ingest_refused_total") == 1
    assert registry.get_sample_value("ingest_chunks_written_total") == 5
