"""The gateway's embedding on the real embedding service, serving the default model from a folder that carries
prompts: a chunk is embedded as a document and a question as a query (the retrieval score is the cosine of the
prompted vectors), and the index records the vector space, so that a gateway embedding with another model, or
through a service that puts other prompts before texts, is refused with a 409 naming both until every document is
deleted."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.support.servers import MODELS, RemoteServer
from tests.support.tiny_models import with_prompts

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
NOTE = "The lighthouse keeper of Varden Point rang the fog bell every ninety seconds."
QUESTION = "How often did the fog bell ring?"


@pytest.fixture(scope="module")
def prompted_embedding(tmp_path_factory):
    folder = with_prompts(MODELS / MODEL, tmp_path_factory.mktemp("prompted") / "model",
                          {"query": "query: ", "passage": "passage: "})
    with RemoteServer("ovgenai_services.embedding", env={"EMBEDDING_MODEL_PATH": str(folder)}) as server:
        yield server


def gateway(embedding, data_dir, **env: str) -> RemoteServer:
    """A gateway for ingesting and retrieving only: its LLM is never called (ready is not waited for, /live is)."""
    return RemoteServer("ovgenai_services.gateway", health_path="/live", env={
        "EMBEDDING_SERVER_ENDPOINT": embedding.url, "LLM_SERVER_ENDPOINT": "http://127.0.0.1:9",
        "DATA_DIR": str(data_dir), **env})


def cosine(embedding, first: str, second: str) -> float:
    data = httpx.post(embedding.url + "/v1/embeddings", json={"input": [first, second]}).json()["data"]
    return float(np.dot(data[0]["embedding"], data[1]["embedding"]))


def ingest(server, name: str = "note.txt") -> httpx.Response:
    return httpx.post(server.url + "/v1/dataprep/ingest", files=[("files", (name, NOTE.encode(), "text/plain"))],
                      timeout=60)


def retrieve(server) -> httpx.Response:
    return httpx.post(server.url + "/v1/retrieve", json={"query": QUESTION, "k": 1}, timeout=60)


def test_chunks_are_documents_questions_queries_and_the_index_keeps_to_its_model(prompted_embedding, tmp_path):
    prompted = cosine(prompted_embedding, "query: " + QUESTION, "passage: " + NOTE)
    assert abs(prompted - cosine(prompted_embedding, QUESTION, NOTE)) > 1e-3  # the prompts matter here
    with gateway(prompted_embedding, tmp_path) as first:
        assert (ingested := ingest(first)).status_code == 200, ingested.text
        [source] = retrieve(first).json()["sources"]
        assert source["score"] == pytest.approx(prompted, abs=2e-4)
    with gateway(prompted_embedding, tmp_path, EMBEDDING_MODEL_ID="BAAI/bge-small-en-v1.5") as other:
        for refused in (retrieve(other), ingest(other, "other.txt")):
            error = refused.json()["error"]
            assert refused.status_code == 409 and error["type"] == "invalid_request_error", refused.text
            assert f"built with embedding model '{MODEL}'" in error["message"]
            assert "this gateway embeds with 'BAAI/bge-small-en-v1.5'" in error["message"]
        deleted = httpx.post(other.url + "/v1/dataprep/delete", json={"file_path": "all"})
        assert deleted.json()["deleted_chunks"] == 1  # emptied: the index is free for this gateway's model
        assert ingest(other).status_code == 200 and retrieve(other).status_code == 200


def test_the_index_keeps_to_the_prompts_its_chunks_were_embedded_with(prompted_embedding, tmp_path):
    with gateway(prompted_embedding, tmp_path) as first:
        assert (ingested := ingest(first)).status_code == 200, ingested.text
    # The same model, its operator's prompts over its own: other vectors for the same texts.
    reprompted = {"EMBEDDING_MODEL_PATH": str(MODELS / MODEL),
                  "EMBEDDING_PROMPTS": '{"query": "search_query: ", "passage": "search_document: "}'}
    with RemoteServer("ovgenai_services.embedding", env=reprompted) as service, gateway(service, tmp_path) as other:
        refused = retrieve(other)
        assert refused.status_code == 409, refused.text
        message = refused.json()["error"]["message"]
        assert '"query": "query: "' in message and '"query": "search_query: "' in message
    with gateway(prompted_embedding, tmp_path) as again:  # the prompts back: served as before
        assert retrieve(again).json()["sources"][0]["text"] == NOTE
