"""The rerank stage with a real cross-encoder: a tiny one built locally with transformers (random weights, seeded;
no reranker ships in a registry package), exported with `python -m ovgenai_models rerank` and served by the
embedding service (RERANK_MODEL_PATH). Its scores mean nothing, which is the point: the gateway must keep exactly
the top_n of the k retrieved chunks by the reranker's order, whatever that order is."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import gateway_env
from tests.gateway.facts import FACTS, documents
from tests.support.servers import MODELS, ROOT, RemoteServer
from tests.support.tiny_models import build_tiny_cross_encoder

K, TOP_N = 5, 2


@pytest.fixture(scope="module")
def rerank_service(tmp_path_factory):
    root = tmp_path_factory.mktemp("reranker")
    source = build_tiny_cross_encoder(root / "source")
    export = subprocess.run(
        [sys.executable, "-m", "ovgenai_models", "rerank", "--source_model", str(source), "--model_name", "tiny-cross",
         "--model_repository_path", str(root / "repo"), "--weight-format", "fp32"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert export.returncode == 0, export.stderr[-2000:]
    # The tiny model has 128 positions: query and chunk are truncated to that together.
    env = {"EMBEDDING_MODEL_PATH": str(MODELS / "sentence-transformers/all-MiniLM-L6-v2"),
           "RERANK_MODEL_PATH": str(root / "repo" / "tiny-cross"), "MAX_INPUT_TOKENS": "128"}
    with RemoteServer("ovgenai_services.embedding", env=env) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(rerank_service, llm_service, tmp_path_factory):
    env = gateway_env(rerank_service.url, llm_service.url, tmp_path_factory.mktemp("rerank-gateway"),
                      RERANK_SERVER_ENDPOINT=rerank_service.url, TOP_K=str(K), TOP_N=str(TOP_N))
    with RemoteServer("ovgenai_services.gateway", env=env) as server:
        text = documents()["almanac.txt"]  # eight facts: few enough chunks to see them all
        response = httpx.post(server.url + "/v1/dataprep/ingest", timeout=120,
                              data={"text": [text], "name": ["almanac.txt"], "chunk_size": "300", "chunk_overlap": "0"})
        assert response.status_code == 200, response.text
        yield server


def retrieve(gateway, query: str, **body) -> list[dict]:
    response = httpx.post(gateway.url + "/v1/retrieve", json={"query": query, **body}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["sources"]


def reranked(rerank_service, query: str, texts: list[str]) -> list[tuple[str, float]]:
    """The reranker's own order, asked directly in TEI's shape."""
    answer = httpx.post(rerank_service.url + "/rerank", json={"query": query, "texts": texts}, timeout=60).json()
    return [(texts[r["index"]], r["score"]) for r in sorted(answer, key=lambda r: r["score"], reverse=True)]


def reranks(gateway) -> float:
    text = httpx.get(gateway.url + "/metrics").text
    return next(s.value for family in text_string_to_metric_families(text) for s in family.samples
                if s.name == "rag_rerank_seconds_count")


def test_keeps_the_rerankers_top_n_of_the_k_nearest(gateway, rerank_service):
    changed = 0
    for _, question, _ in FACTS[:8]:
        everything = retrieve(gateway, question, k=50, top_n=50)  # every chunk, with its cosine score
        assert 8 <= len(everything) < 50
        nearest = sorted(everything, key=lambda s: s["score"], reverse=True)[:K]
        candidates = retrieve(gateway, question, top_n=K)  # k = TOP_K
        assert sorted(s["text"] for s in candidates) == sorted(s["text"] for s in nearest)
        expected = reranked(rerank_service, question, [s["text"] for s in nearest])[:TOP_N]
        kept = retrieve(gateway, question)
        assert [s["text"] for s in kept] == [text for text, _ in expected]
        assert [s["rerank_score"] for s in kept] == pytest.approx([score for _, score in expected], abs=1e-3)
        changed += [s["text"] for s in kept] != [s["text"] for s in nearest[:TOP_N]]
    assert changed, "the reranker agreed with the vector search on every question: nothing was shown"


def test_chatqna_answers_from_the_reranked_chunks_and_times_the_stage(gateway):
    question = FACTS[1][1]
    before = reranks(gateway)
    response = httpx.post(gateway.url + "/v1/chatqna", params={"stream_format": "openai"},
                          json={"messages": question, "max_tokens": 8}, timeout=120)
    assert reranks(gateway) == before + 1
    lines = [line for line in response.text.split("\n") if line]
    final = json.loads(lines[-2].removeprefix("data: "))
    assert [s["text"] for s in final["sources"]] == [s["text"] for s in retrieve(gateway, question)]
    assert isinstance(final["timings"]["rerank_ms"], float)
    opea_body = {"messages": question, "k": 4, "top_n": 3, "stream": False, "max_tokens": 2}
    reply = httpx.post(gateway.url + "/v1/chatqna", json=opea_body, timeout=120).json()
    assert len(reply["sources"]) == 3 and all("rerank_score" in s for s in reply["sources"])


def test_health_checks_the_reranker(gateway):
    body = httpx.get(gateway.url + "/health/details").json()
    assert body["dependencies"]["rerank"] == "ok"


def test_a_service_without_a_rerank_model_is_found_by_the_first_rerank(embedding_service, llm_service, tmp_path):
    """The default embedding service serves no reranker: /rerank is 404 there. Readiness asks the rerank service's
    own health check (a probe never reranks), so the first rerank is what finds it, and says which service."""
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path, RERANK_SERVER_ENDPOINT=embedding_service.url)
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as gw:
        assert httpx.get(gw.url + "/health").status_code == 200
        httpx.post(gw.url + "/v1/dataprep/ingest", data={"text": ["The Brindle tower has 212 steps."]}, timeout=60)
        response = httpx.post(gw.url + "/v1/retrieve", json={"query": "Brindle tower"}, timeout=60)
        assert response.status_code == 503 and "rerank service" in response.json()["error"]["message"]
