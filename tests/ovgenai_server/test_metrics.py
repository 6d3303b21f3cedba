"""The backend's Prometheus metrics (metrics.py): each served model's engine gauges, read from its runtime when
scraped, and the per-request counters and histograms under vLLM's names."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from ovgenai_server.engine.contract.types import EngineState, EngineStats
from ovgenai_server.metrics import ServerMetrics
from ovgenai_server.models.registry import ModelRegistry
from tests.support.fake_engine import FakeRuntime, fake_model


def served(*runtimes: FakeRuntime) -> tuple[ModelRegistry, CollectorRegistry]:
    models = ModelRegistry({f"m{i}": fake_model(runtime, name=f"m{i}") for i, runtime in enumerate(runtimes)})
    registry = CollectorRegistry()
    ServerMetrics(registry, models.runtimes)
    return models, registry


def gauges(registry: CollectorRegistry, model: str) -> dict[str, float | None]:
    names = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "engine_available",
             "engine_restarts_total", "prefix_cache_waits_total", "grammar_checks_pending")
    return {name: registry.get_sample_value(f"ovgenai:{name}", {"model_name": model}) for name in names}


def test_each_models_engine_is_read_when_scraped():
    busy, loading = FakeRuntime(), FakeRuntime(state=EngineState.LOADING)
    busy.stats = EngineStats(running=2, waiting=1, kv_cache_usage=0.5, restarts=3, prefix_waits=4)
    busy.active = 6  # in flight: four of them not in the running batch yet
    busy.grammars_pending = 5
    _, registry = served(busy, loading)
    assert gauges(registry, "m0") == {"num_requests_running": 2, "num_requests_waiting": 4, "kv_cache_usage_perc": 0.5,
                                      "engine_available": 1, "engine_restarts_total": 3,
                                      "prefix_cache_waits_total": 4, "grammar_checks_pending": 5}
    assert gauges(registry, "m1")["engine_available"] == 0 and gauges(registry, "m1")["num_requests_waiting"] == 0
    busy.stats = EngineStats(running=1, waiting=9)  # the engine's own count, when it is the larger
    assert gauges(registry, "m0")["num_requests_waiting"] == 9


def test_a_model_added_later_is_scraped_too():
    models, registry = served(FakeRuntime())
    assert gauges(registry, "late")["engine_available"] is None
    models.add(fake_model(FakeRuntime(), name="late"))
    assert gauges(registry, "late")["engine_available"] == 1


def test_the_request_metrics_are_named_as_vllms():
    _, registry = served()
    scraped = generate_latest(registry).decode()
    for name in ("prompt_tokens_total", "generation_tokens_total", "request_success_total", "request_failure_total",
                 "time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                 "request_queue_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds"):
        assert f"# TYPE ovgenai:{name}" in scraped, name
