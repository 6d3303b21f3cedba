"""The LLM microservice's metrics on /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.latency = Histogram(
            "opea_llm_request_first_byte_seconds", "Time until the backend's response started, by route.",
            ["path"], registry=registry,
        )
        self.routed_total = Counter(
            "opea_llm_replica_requests", "Requests sent to each backend replica (1, 2, ... in LLM_ENDPOINT's order).",
            ["replica"], registry=registry,
        )

    def observe(self, path: str, seconds: float) -> None:
        self.latency.labels(path).observe(seconds)

    def routed(self, index: int) -> None:
        self.routed_total.labels(str(index + 1)).inc()
