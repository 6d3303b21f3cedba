"""Prometheus metrics for generation, named after vLLM's where they fit (prefix `ovgenai:`).

Engine gauges (running, waiting, KV-cache usage, restarts, grammars compiling) are read from each engine when
scraped, so the hot path never touches them; counters and histograms are updated once per request or per streamed
chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .engine.contract.interface import Runtime

PREFIX = "ovgenai:"
_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0)
_E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)
# A request's phases in the engine: queue time is milliseconds when the batch has room, minutes when it has not.
_PHASE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)


class _EngineCollector(Collector):
    """Each served model's runtime gauges, read when scraped: (name, runtime) pairs from `runtimes`, the requests
    `queued` for their turn before the engine, and the `stalls` of that waiting line (request/fair_share.py)."""

    def __init__(self, runtimes: Callable[[], Iterable[tuple[str, Runtime]]], queued: Callable[[str], int],
                 stalls: Callable[[str], int]):
        self._runtimes, self._queued, self._stalls = runtimes, queued, stalls

    def collect(self):
        labels = ["model_name"]
        running = GaugeMetricFamily(f"{PREFIX}num_requests_running", "Requests in the running batch.", labels=labels)
        waiting = GaugeMetricFamily(f"{PREFIX}num_requests_waiting", "Requests waiting to run.", labels=labels)
        kv = GaugeMetricFamily(f"{PREFIX}kv_cache_usage_perc", "KV-cache usage (1 = full).", labels=["model_name"])
        up = GaugeMetricFamily(f"{PREFIX}engine_available", "1 when the engine serves requests.", labels=["model_name"])
        restarts = CounterMetricFamily(f"{PREFIX}engine_restarts", "Engine process restarts.", labels=["model_name"])
        prefix_waits = CounterMetricFamily(
            f"{PREFIX}prefix_cache_waits", "Requests held until another with the same long prompt prefix had "
            "computed it, so that they found it in the prefix cache.", labels=labels,
        )
        # Not in num_requests_waiting: a grammar that fails to compile is a 400, never a request that ran.
        grammars = GaugeMetricFamily(f"{PREFIX}grammar_checks_pending", "Requests waiting for their grammar to "
                                     "compile before they are admitted.", labels=labels)
        stalls = CounterMetricFamily(
            f"{PREFIX}admission_stalls", "Times requests waited while the engine had room and none was let in for "
            "seconds: the waiting line was rebuilt (readiness failed with the reason).", labels=labels,
        )
        for name, runtime in self._runtimes():
            stats = runtime.stats
            running.add_metric([name], stats.running)
            waiting.add_metric([name], max(stats.waiting, runtime.in_flight() - stats.running) + self._queued(name))
            kv.add_metric([name], stats.kv_cache_usage)
            up.add_metric([name], 1.0 if runtime.health().ready else 0.0)
            restarts.add_metric([name], stats.restarts)
            prefix_waits.add_metric([name], stats.prefix_waits)
            grammars.add_metric([name], runtime.grammar_checks())
            stalls.add_metric([name], self._stalls(name))
        yield from (running, waiting, kv, up, restarts, prefix_waits, grammars, stalls)


class ServerMetrics:
    def __init__(self, registry: CollectorRegistry, runtimes: Callable[[], Iterable[tuple[str, Runtime]]],
                 queued: Callable[[str], int] = lambda _name: 0, stalls: Callable[[str], int] = lambda _name: 0):
        labels = ["model_name"]
        registry.register(_EngineCollector(runtimes, queued, stalls))
        self.prompt_tokens = Counter(f"{PREFIX}prompt_tokens", "Prompt tokens processed.", labels, registry=registry)
        self.generation_tokens = Counter(
            f"{PREFIX}generation_tokens", "Tokens generated.", labels, registry=registry
        )
        self.request_success = Counter(
            f"{PREFIX}request_success", "Requests finished, by finish reason.", [*labels, "finished_reason"],
            registry=registry,
        )
        self.request_failure = Counter(
            f"{PREFIX}request_failure", "Requests that ended in an error.", labels, registry=registry
        )
        self.ttft = Histogram(
            f"{PREFIX}time_to_first_token_seconds", "Time to first token.", labels, buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.itl = Histogram(
            f"{PREFIX}inter_token_latency_seconds", "Time between streamed tokens.", labels,
            buckets=_LATENCY_BUCKETS, registry=registry,
        )
        self.e2e = Histogram(
            f"{PREFIX}e2e_request_latency_seconds", "Request latency, arrival to last token.", labels,
            buckets=_E2E_BUCKETS, registry=registry,
        )
        # Measured by the engine loop (engine/engine_process/loop.py), observed once per finished request.
        self.queue_time = Histogram(
            f"{PREFIX}request_queue_time_seconds", "Time a request waited in the engine before the pipeline took it.",
            labels, buckets=_PHASE_BUCKETS, registry=registry,
        )
        self.prefill_time = Histogram(
            f"{PREFIX}request_prefill_time_seconds", "Time from the pipeline taking a request to its first token.",
            labels, buckets=_PHASE_BUCKETS, registry=registry,
        )
        self.decode_time = Histogram(
            f"{PREFIX}request_decode_time_seconds", "Time from a request's first token to its last.",
            labels, buckets=_PHASE_BUCKETS, registry=registry,
        )
