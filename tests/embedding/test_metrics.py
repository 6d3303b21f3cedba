"""The embedding service's metrics: requests, tokens and latency per request, texts per pipeline call, and the
queue's length read when /metrics is scraped."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ovgenai_services.embedding.metrics import EmbeddingMetrics


def test_requests_batches_and_the_queue_are_observed():
    registry = CollectorRegistry()
    metrics = EmbeddingMetrics(registry)
    metrics.observe_request(0.01, 12)
    metrics.observe_batch(8, 100)
    queued = [3]
    metrics.watch_queue(lambda: queued[0])
    assert registry.get_sample_value("embedding_requests_total") == 1
    assert registry.get_sample_value("embedding_tokens_total") == 12
    assert registry.get_sample_value("embedding_batch_size_sum") == 8
    assert registry.get_sample_value("embedding_queued_texts") == 3
    queued[0] = 0
    assert registry.get_sample_value("embedding_queued_texts") == 0
