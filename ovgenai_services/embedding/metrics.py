"""The embedding microservice's metrics on /metrics: requests, tokens, latency and the batches they made."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class EmbeddingMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter("embedding_requests", "Embedding requests served.", registry=registry)
        self.tokens = Counter("embedding_tokens", "Tokens embedded.", registry=registry)
        self.latency = Histogram(
            "embedding_request_seconds", "Embedding request latency.", registry=registry,
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.batch_size = Histogram(
            "embedding_batch_size", "Texts per pipeline call.", registry=registry,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
        )
        self.queued_texts = Gauge(
            "embedding_queued_texts", "Texts waiting for a batch (the batch being embedded not counted); a request "
            "whose client has gone leaves at once.", registry=registry,
        )

    def watch_queue(self, queued: Callable[[], int]) -> None:
        """The queue's length read when /metrics is scraped (nothing to keep up to date per text)."""
        self.queued_texts.set_function(queued)

    def observe_request(self, seconds: float, tokens: int) -> None:
        self.requests.inc()
        self.tokens.inc(tokens)
        self.latency.observe(seconds)

    def observe_batch(self, size: int, _tokens: int) -> None:
        self.batch_size.observe(size)
