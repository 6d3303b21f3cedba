"""RERANK_MODEL_ID turns the rerank stage on: at the embedding service unless RERANK_SERVER_ENDPOINT says where."""

from __future__ import annotations

from microservices.gateway.settings import GatewaySettings


def test_rerank_model_id_reranks_at_the_embedding_service(monkeypatch):
    monkeypatch.setenv("EMBEDDING_SERVER_ENDPOINT", "http://embedding:6000")
    monkeypatch.setenv("RERANK_MODEL_ID", "")  # compose's ${RERANK_MODEL_ID:-}: no rerank stage
    assert GatewaySettings().rerank_endpoint is None
    monkeypatch.setenv("RERANK_MODEL_ID", "BAAI/bge-reranker-base")
    assert GatewaySettings().rerank_endpoint == "http://embedding:6000"
    monkeypatch.setenv("TEI_RERANKING_ENDPOINT", "http://tei-reranker:80")  # OPEA's own reranker still wins
    assert GatewaySettings().rerank_endpoint == "http://tei-reranker:80"
