"""What a finished request leaves behind: its usage, its metrics, its span's attributes and one log line."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace

from ..engine.contract.types import RequestTimings
from ..metrics import ServerMetrics

logger = logging.getLogger("ovgenai_server.requests")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def record(metrics: ServerMetrics, rid: str, model: str, started: float, ttft: float | None, counted: dict[str, int],
           finishes: Sequence[str | None], timings: RequestTimings | None = None) -> None:
    """A finished request counted in the metrics (and its span, when traced) and logged once."""
    elapsed = time.perf_counter() - started
    completion_tokens = counted["completion_tokens"]
    metrics.prompt_tokens.labels(model).inc(counted["prompt_tokens"])
    metrics.generation_tokens.labels(model).inc(completion_tokens)
    if ttft is not None:
        metrics.ttft.labels(model).observe(ttft)
    metrics.e2e.labels(model).observe(elapsed)
    if timings is not None:
        metrics.queue_time.labels(model).observe(timings.queue)
        metrics.prefill_time.labels(model).observe(timings.prefill)
        metrics.decode_time.labels(model).observe(timings.decode)
    for reason in finishes:
        metrics.request_success.labels(model, reason or "stop").inc()
    current = trace.get_current_span()  # the request's server span when traced
    if current.is_recording():
        current.set_attributes(_span_attributes(model, counted, ttft, timings))
    logger.info(
        "request %s model=%s prompt_tokens=%d completion_tokens=%d ttft_ms=%.1f duration_ms=%.1f finish=%s",
        rid, model, counted["prompt_tokens"], completion_tokens, (ttft or 0) * 1000, elapsed * 1000,
        ",".join(f or "stop" for f in finishes),
    )


def _span_attributes(model: str, counted: dict[str, int], ttft: float | None,
                     timings: RequestTimings | None) -> dict[str, Any]:
    """What a traced request's span says of its generation (OpenTelemetry's gen_ai names where they exist)."""
    attributes: dict[str, Any] = {"gen_ai.request.model": model,
                                  "gen_ai.usage.input_tokens": counted["prompt_tokens"],
                                  "gen_ai.usage.output_tokens": counted["completion_tokens"]}
    if ttft is not None:
        attributes["ovgenai.time_to_first_token_s"] = ttft
    if timings is not None:
        attributes.update({"ovgenai.queue_time_s": timings.queue, "ovgenai.prefill_time_s": timings.prefill,
                           "ovgenai.decode_time_s": timings.decode})
    return attributes
