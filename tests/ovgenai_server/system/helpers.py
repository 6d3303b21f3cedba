"""Reading the backend's own metrics in tests."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def metric(url: str, name: str, model: str | None = None) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and (model is None or sample.labels.get("model_name") == model):
                total += sample.value
    return total
