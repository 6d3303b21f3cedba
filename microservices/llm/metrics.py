"""The LLM microservice's metrics on /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.latency = Histogram(
            "opea_llm_request_first_byte_seconds", "Time until the backend's response started, by route.",
            ["path"], registry=registry,
        )

    def observe(self, path: str, seconds: float) -> None:
        self.latency.labels(path).observe(seconds)
