"""The embedding service's wiring: the lifespan loads the model (through the model process, stood in for here),
starts its batching, serves it on app.state, logs what it serves, and closes it when the app stops; a model that
cannot be loaded stops the start with the reason."""

from __future__ import annotations

import logging

import httpx
import pytest

from ovgenai_services.embedding import app as embedding_app
from ovgenai_services.embedding.app import create_app
from ovgenai_services.embedding.settings import EmbeddingSettings
from tests.embedding.stand_ins import service


def loaded(events: list[str]):
    """EmbeddingService.load as the lifespan calls it, answering the stand-in service and recording its life."""
    svc = service(dimensions=384)
    svc.start = lambda: events.append("started")

    async def close():
        events.append("closed")

    svc.close = close

    async def load(settings, metrics):
        events.append(f"loaded {settings.model} with {type(metrics).__name__}")
        return svc

    return svc, load


async def test_the_lifespan_loads_starts_serves_and_closes_the_model(monkeypatch, caplog):
    events: list[str] = []
    svc, load = loaded(events)
    monkeypatch.setattr(embedding_app.EmbeddingService, "load", load)
    app = create_app(EmbeddingSettings(model="/models/encoder"))
    assert app.state.service is None  # until the lifespan has loaded it
    with caplog.at_level(logging.INFO, logger="ovgenai_services.embedding.app"):
        async with app.router.lifespan_context(app):
            assert app.state.service is svc and events == ["loaded /models/encoder with EmbeddingMetrics", "started"]
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
                reply = await http.post("/v1/embeddings", json={"input": "a"})
                metrics = (await http.get("/metrics")).text
    assert reply.status_code == 200 and reply.json()["data"][0]["embedding"] == [3.0, 4.0]
    assert "embedding_batch_size" in metrics  # the service's metrics on the app's own registry
    assert events[-1] == "closed"
    assert "serving embeddings of m (384 dimensions)" in caplog.text


async def test_a_model_that_cannot_be_loaded_stops_the_start_with_the_reason(monkeypatch):
    async def load(_settings, _metrics):
        raise FileNotFoundError("No OpenVINO embedding model in '/nowhere'")

    monkeypatch.setattr(embedding_app.EmbeddingService, "load", load)
    app = create_app(EmbeddingSettings(model="/nowhere"))
    with pytest.raises(FileNotFoundError, match="/nowhere"):
        async with app.router.lifespan_context(app):
            pass
    assert app.state.service is None
