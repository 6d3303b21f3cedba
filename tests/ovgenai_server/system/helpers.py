"""Reading the backend's own metrics and streams in tests, and the in-process engine they are compared with."""

from __future__ import annotations

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.support.replies import stream_events


def metric(url: str, name: str, model: str | None = None) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and (model is None or sample.labels.get("model_name") == model):
                total += sample.value
    return total


def stream_errors(text: str) -> list[dict]:
    """The error events of a server-sent stream: events with an "error" key, not a model that writes the word."""
    return [event for event in stream_events(text) if "error" in event]


def pipeline_logprobs(pipeline, prompt_ids: list[int], config) -> list[float]:
    """Every log probability one request returns on an in-process ContinuousBatchingPipeline, in order."""
    import openvino

    handle = pipeline.add_request(0, openvino.Tensor(np.asarray([prompt_ids], dtype=np.int64)), config)
    logprobs: list[float] = []
    while pipeline.has_non_finished_requests():
        pipeline.step()
        if handle.can_read():
            for output in handle.read().values():
                logprobs.extend(output.generated_log_probs)
    return logprobs
