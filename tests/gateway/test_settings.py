"""The gateway's settings: RERANK_MODEL_ID turns the rerank stage on (at the embedding service unless
RERANK_SERVER_ENDPOINT says where), LINK_ALLOWED_NETWORKS as an environment variable carries it, chunking bounded,
an empty API key is none."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from ovgenai_services.gateway.settings import GatewaySettings


def test_rerank_model_id_reranks_at_the_embedding_service(monkeypatch):
    monkeypatch.setenv("EMBEDDING_SERVER_ENDPOINT", "http://embedding:6000")
    monkeypatch.setenv("RERANK_MODEL_ID", "")  # compose's ${RERANK_MODEL_ID:-}: no rerank stage
    assert GatewaySettings().rerank_endpoint is None
    monkeypatch.setenv("RERANK_MODEL_ID", "BAAI/bge-reranker-base")
    assert GatewaySettings().rerank_endpoint == "http://embedding:6000"
    monkeypatch.setenv("TEI_RERANKING_ENDPOINT", "http://tei-reranker:80")  # OPEA's own reranker still wins
    assert GatewaySettings().rerank_endpoint == "http://tei-reranker:80"


def test_allowed_networks_from_the_environment(monkeypatch):
    monkeypatch.setenv("LINK_ALLOWED_NETWORKS", "127.0.0.1/32, fd00::/8")
    networks = GatewaySettings().link_allowed_networks
    assert networks == [ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("fd00::/8")]
    assert GatewaySettings(link_allowed_networks="").link_allowed_networks == []
    with pytest.raises(ValidationError):
        GatewaySettings(link_allowed_networks="not-a-network")


def test_chunk_settings_are_bounded():
    assert GatewaySettings(chunk_size=200, chunk_overlap=199).chunk_overlap == 199
    for bad in ({"chunk_size": 49}, {"chunk_size": 10_001}, {"chunk_size": 200, "chunk_overlap": 200}):
        with pytest.raises(ValidationError):
            GatewaySettings(**bad)


def test_every_ingest_slot_has_a_place_for_its_body():
    with pytest.raises(ValidationError, match="INGEST_BODIES"):
        GatewaySettings(ingest_concurrency=4, ingest_bodies=2)
    pace = GatewaySettings(upload_min_rate=1000, upload_grace=5).upload_pace
    assert (pace.min_rate, pace.grace) == (1000, 5)


def test_an_empty_key_is_none_and_the_openai_client_gets_a_placeholder(monkeypatch):
    monkeypatch.setenv("LLM_API_KEY", "")  # compose's ${API_KEY:-}
    assert GatewaySettings().llm_api_key == "unused"
    monkeypatch.setenv("LLM_API_KEY", "secret")
    assert GatewaySettings().llm_api_key == "secret"


def test_opea_megaservice_names_read_where_the_endpoints_are_not_set(monkeypatch):
    """OPEA's ChatQnA guide names the upstreams by host and port, its index INDEX_NAME."""
    for name, value in {"EMBEDDING_SERVER_HOST_IP": "10.0.0.5", "EMBEDDING_SERVER_PORT": "6006",
                        "LLM_SERVER_HOST_IP": "fd00::7", "RERANK_SERVER_HOST_IP": "rerank", "INDEX_NAME": "rag-redis"
                        }.items():
        monkeypatch.setenv(name, value)
    settings = GatewaySettings()
    assert (settings.embedding_endpoint, settings.llm_endpoint, settings.rerank_endpoint) == (
        "http://10.0.0.5:6006", "http://[fd00::7]:9000", "http://rerank:6000")
    assert settings.collection == "rag-redis"
    monkeypatch.setenv("LLM_SERVER_ENDPOINT", "http://llm:9000")
    assert GatewaySettings().llm_endpoint == "http://llm:9000"  # the endpoint itself wins
