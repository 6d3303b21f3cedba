"""Per-stage timings of a RAG request: observed into /metrics histograms as each stage ends, reported to the
client (the chat page shows them beside the answer), and traced as spans `rag.<stage>` when tracing is on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ovgenai_common.tracing import span

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# The stages a request goes through, in order, as the client sees them (`<stage>_ms`).
STAGES = ("embed", "retrieve", "rerank", "llm_first_token", "total")


class RAGMetrics:
    def __init__(self, registry: CollectorRegistry):
        def histogram(name: str, text: str) -> Histogram:
            return Histogram(f"rag_{name}_seconds", text, buckets=_BUCKETS, registry=registry)

        self.stages = {
            "embed": histogram("embed", "Embedding the question."),
            "retrieve": histogram("retrieve", "Vector search."),
            "rerank": histogram("rerank", "Reranking the retrieved chunks (only with a reranker)."),
            "llm_first_token": histogram("llm_first_token", "From sending the prompt to the LLM's first token."),
            "total": histogram("total", "Request arrival to the end of the answer."),
        }
        self.first_token = histogram("first_token", "Request arrival to the LLM's first token.")


class Timings:
    """One request's stages, in seconds; each is observed into its histogram when it ends."""

    def __init__(self, metrics: RAGMetrics):
        self.metrics = metrics
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def record(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = seconds
        self.metrics.stages[stage].observe(seconds)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Times and traces the block; a stage that fails is not recorded (its span says it failed)."""
        with span(f"rag.{name}"):
            started = time.perf_counter()
            yield
            self.record(name, time.perf_counter() - started)

    def first_token(self, llm_started: float) -> None:
        now = time.perf_counter()
        self.record("llm_first_token", now - llm_started)
        self.metrics.first_token.observe(now - self.started)

    def finish(self) -> dict[str, float | None]:
        self.record("total", time.perf_counter() - self.started)
        return self.report()

    def report(self) -> dict[str, float | None]:
        """Milliseconds per stage; null for a stage the request did not go through."""
        return {f"{stage}_ms": round(self.seconds[stage] * 1000, 1) if stage in self.seconds else None
                for stage in STAGES}


class IngestMetrics:
    """Ingestion's load: running, receiving and waiting requests, refusals, and chunks written (committed or not
    yet)."""

    def __init__(self, registry: CollectorRegistry):
        self.running = Gauge("ingest_running", "Ingest requests being processed.", registry=registry)
        self.waiting = Gauge("ingest_waiting", "Ingest requests waiting: for a place, their bodies unread "
                             "(INGEST_QUEUE), or for a slot, their bodies received.", registry=registry)
        self.receiving = Gauge("ingest_receiving", "Ingest requests whose bodies are arriving (they hold a place of "
                               "INGEST_BODIES, not a slot).", registry=registry)
        self.refused = Counter("ingest_refused", "Ingest requests refused with 429: every place (INGEST_BODIES) and "
                               "the queue taken.", registry=registry)
        self.chunks = Counter("ingest_chunks_written", "Chunks embedded and written to the vector store; a document "
                              "becomes visible only once all of its chunks are.", registry=registry)
