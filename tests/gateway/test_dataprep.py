"""OPEA's dataprep routes on the real app (its store an embedded Chroma under tmp_path), with the embedding service
on httpx.MockTransport (tests/gateway/fake_upstreams.py): what each route answers, the checks of validation.py, and
an embedding service that fails mid-ingest leaving nothing stored. The same against the real services:
system/test_gateway.py and system/test_opea_parity.py."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.fake_upstreams import FakeUpstreams, gateway


async def ingest(http: httpx.AsyncClient, **form) -> httpx.Response:
    return await http.post("/v1/dataprep/ingest", data=form)


async def test_ingest_list_and_delete_a_text(tmp_path):
    async with gateway(tmp_path) as http:
        first = await ingest(http, text=["The Brindle tower has 212 steps."], name=["tower.txt"])
        assert first.status_code == 200, first.text
        assert first.json()["documents"] == [{"name": "tower.txt", "chunks": 1, "status": "ingested"}]
        again = await ingest(http, text=["The Brindle tower has 212 steps."], name=["tower.txt"])
        assert again.json()["documents"][0]["status"] == "unchanged"
        listed = (await http.get("/v1/dataprep/get")).json()
        assert [(d["name"], d["chunks"]) for d in listed] == [("tower.txt", 1)]
        assert (await http.post("/v1/dataprep/get")).json() == listed  # OPEA's clients POST
        assert (await http.post("/v1/dataprep/get", json={"index_name": "other"})).json() == []
        assert (await http.get("/v1/dataprep/indices")).json() == ["chatqna"]
        deleted = await http.post("/v1/dataprep/delete", json={"file_path": "tower.txt"})
        assert deleted.json() == {"status": True, "deleted_chunks": 1}
        missing = await http.post("/v1/dataprep/delete", json={"file_path": "tower.txt"})
        assert missing.status_code == 404 and missing.json()["error"]["param"] == "file_path"


@pytest.mark.parametrize(("form", "status", "param"), [
    ({}, 400, "files"),
    ({"text": ["x"], "index_name": "other"}, 400, "index_name"),
    ({"text": ["x"], "chunk_size": "100", "chunk_overlap": "100"}, 400, "chunk_overlap"),
    ({"text": ["   "]}, 400, "text"),
    ({"link_list": "not json"}, 400, "link_list"),
    ({"link_list": "[" * 50_000 + "]" * 50_000}, 400, "link_list"),  # a form field: no middleware parsed it
    ({"link_list": '["http://127.0.0.1/secret"]'}, 400, "link_list"),  # the address guard
])
async def test_bad_ingests_are_400s_that_name_the_field(tmp_path, form, status, param):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        reply = await ingest(http, **form)
        assert reply.status_code == status and reply.json()["error"]["param"] == param, reply.text
        assert (await http.get("/v1/dataprep/get")).json() == []
    assert upstreams.embedded == []  # refused before anything was embedded


async def test_delete_checks_the_index(tmp_path):
    async with gateway(tmp_path) as http:
        wrong = await http.post("/v1/dataprep/delete", json={"file_path": "all", "index_name": "other"})
        assert wrong.status_code == 404 and wrong.json()["error"]["param"] == "index_name"
        everything = await http.post("/v1/dataprep/delete", json={"file_path": "all", "index_name": "all"})
        assert everything.json() == {"status": True, "deleted_chunks": 0}


@pytest.mark.parametrize(("failure", "status"), [("down", 503), (500, 502), (404, 503)])
async def test_an_embedding_failure_stores_nothing_and_says_which_service(tmp_path, failure, status):
    upstreams = FakeUpstreams()
    if failure == "down":
        upstreams.down.add("embedding.test")
    else:
        upstreams.status["embedding.test"] = failure
    async with gateway(tmp_path, upstreams, embed_batch_size=1) as http:
        reply = await ingest(http, text=["one. " * 400], chunk_size="100", chunk_overlap="0")
        assert reply.status_code == status and "embedding service" in reply.json()["error"]["message"]
        assert "embedding.test" not in reply.text  # the address stays in the log
        assert (await http.get("/v1/dataprep/get")).json() == []
