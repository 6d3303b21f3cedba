"""OPEA's dataprep routes on the real app (its store an embedded Chroma under tmp_path), with the embedding service
on httpx.MockTransport (tests/gateway/fake_upstreams.py): what each route answers, the checks of validation.py,
indices kept apart, Office files stored with where each chunk is and a bad one storing nothing, and an embedding
service that fails mid-ingest leaving nothing stored. The same against the real services:
system/test_gateway.py and system/test_opea_parity.py."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ovgenai_services.gateway import chroma
from tests.gateway.fake_upstreams import FakeUpstreams, gateway
from tests.gateway.office_files import DOCX, XLSX, word_document, workbook


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
    ({"text": ["x"], "index_name": "a b"}, 400, "index_name"),
    ({"text": ["x"], "index_name": "all"}, 400, "index_name"),
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


async def listed(http: httpx.AsyncClient, index: str | None) -> set[tuple[str, str]]:
    entries = (await http.post("/v1/dataprep/get", json={"index_name": index})).json()
    return {(entry["name"], entry["index_name"]) for entry in entries}


async def test_each_index_keeps_its_own_documents_until_it_is_deleted(tmp_path):
    async with gateway(tmp_path) as http:
        made = await ingest(http, text=["The Brindle tower has 212 steps."], name=["tower.txt"], index_name="team")
        assert made.status_code == 200, made.text
        await ingest(http, text=["The canal is 41 km long."], name=["canal.txt"])
        assert (await http.get("/v1/dataprep/indices")).json() == ["chatqna", "team"]
        assert await listed(http, "team") == {("tower.txt", "team")}
        assert await listed(http, None) == {("canal.txt", "chatqna")}
        assert await listed(http, "all") == {("tower.txt", "team"), ("canal.txt", "chatqna")}
        assert await listed(http, "nowhere") == set()  # as OPEA lists an unknown index
        elsewhere = await http.post("/v1/dataprep/delete", json={"file_path": "canal.txt", "index_name": "team"})
        assert elsewhere.status_code == 404 and "'team'" in elsewhere.json()["error"]["message"]
        dropped = await http.post("/v1/dataprep/delete", json={"file_path": "all", "index_name": "team"})
        assert dropped.json() == {"status": True, "deleted_chunks": 1}
        assert (await http.get("/v1/dataprep/indices")).json() == ["chatqna"] and await listed(http, None)
        await ingest(http, text=["The Brindle tower has 212 steps."], name=["tower.txt"], index_name="team")
        everything = await http.post("/v1/dataprep/delete", json={"file_path": "all"})  # OPEA's: every index
        assert everything.json()["deleted_chunks"] == 2 and await listed(http, "all") == set()
        assert (await http.get("/v1/dataprep/indices")).json() == ["chatqna"]


async def test_office_files_are_stored_with_where_each_chunk_is_and_a_bad_one_stores_nothing(tmp_path):
    report = ("report.docx", word_document("The Brindle canal is 41 km long."), DOCX)
    sales = ("sales.xlsx", workbook({"Q1": [["Region", "Amount"], ["North", 1200], ["South", 900]]}), XLSX)
    async with gateway(tmp_path, max_indices=2) as http:
        broken = await upload(http, [report, sales, ("broken.xlsx", b"PK\x03\x04 not really", XLSX)],
                              index_name="team")
        assert broken.status_code == 400 and "'broken.xlsx'" in broken.json()["error"]["message"], broken.text
        assert await listed(http, "all") == set() and (await http.get("/v1/dataprep/indices")).json() == ["chatqna"]
        reply = await upload(http, [report, sales, ("export", b'{"canal": {"length_km": 41}}', "application/json")],
                             index_name="team")
        assert reply.status_code == 200, reply.text
        assert await listed(http, "team") == {("report.docx", "team"), ("sales.xlsx", "team"), ("export", "team")}
        full = await ingest(http, text=["x"], index_name="other")  # the default and team: MAX_INDICES is 2
        assert full.status_code == 409 and "MAX_INDICES" in full.json()["error"]["message"]
    stored = chroma.make_client(chroma.StoreLocation("team", data_dir=tmp_path)).get_collection("team").get()
    where = {text: {key: metadata[key] for key in ("page", "sheet", "rows", "path") if key in metadata}
             for text, metadata in zip(stored["documents"], stored["metadatas"], strict=True)}
    assert where == {"The Brindle canal is 41 km long.": {"page": 0},
                     "Region: North; Amount: 1200\nRegion: South; Amount: 900": {"page": 0, "sheet": "Q1",
                                                                                  "rows": "2-3"},
                     "canal.length_km: 41": {"page": 0, "path": "canal.length_km"}}


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


async def upload(http: httpx.AsyncClient, files: list[tuple[str, bytes]], **form) -> httpx.Response:
    return await http.post("/v1/dataprep/ingest", files=[("files", file) for file in files], data=form)


@pytest.mark.parametrize("names", [
    ["dir1/a.txt", "dir2/a.txt"],  # the folders are not part of a document's name
    ["a.txt ", "a.txt"],  # nor surrounding spaces
    ["a.txt", "a.txt"],
])
async def test_uploads_of_one_request_that_would_share_a_name_are_refused(tmp_path, names):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        reply = await upload(http, [(names[0], b"Alpha fact one."), (names[1], b"Beta fact two.")])
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["param"] == "files" and "'a.txt'" in error["message"]
        assert all(f"'{name}'" in error["message"] for name in names)
        assert (await http.get("/v1/dataprep/get")).json() == []
    assert upstreams.embedded == []  # refused before anything was read


async def test_a_text_named_as_an_upload_of_the_same_request_is_refused(tmp_path):
    async with gateway(tmp_path) as http:
        reply = await http.post("/v1/dataprep/ingest", files=[("files", ("notes.txt", b"Alpha fact."))],
                                data={"text": ["Beta fact."], "name": ["notes.txt"]})
        assert reply.status_code == 400 and "'notes.txt'" in reply.json()["error"]["message"], reply.text
        assert (await http.get("/v1/dataprep/get")).json() == []


async def test_a_name_from_an_earlier_request_is_replaced(tmp_path):
    async with gateway(tmp_path) as http:
        first = await upload(http, [("dir1/a.txt", b"Alpha fact one.")])
        second = await upload(http, [("dir2/a.txt", b"Beta fact two.")])
        assert [r.json()["documents"][0]["status"] for r in (first, second)] == ["ingested", "replaced"]
        sources = (await http.post("/v1/retrieve", json={"query": "fact", "k": 5})).json()["sources"]
        assert [s["text"] for s in sources] == ["Beta fact two."]


async def test_a_long_file_name_keeps_its_extension(tmp_path):
    name = "minutes of the canal board " * 12 + ".txt"  # 328 characters
    async with gateway(tmp_path) as http:
        reply = await upload(http, [(name, b"The board met at dawn.")])
        assert reply.status_code == 200, reply.text
        [stored] = [d["name"] for d in reply.json()["documents"]]
        assert len(stored) == 255 and stored.endswith(".txt") and name.startswith(stored.removesuffix(".txt"))
        assert [d["name"] for d in (await http.get("/v1/dataprep/get")).json()] == [stored]


async def test_documents_are_listed_replaced_and_deleted_a_page_at_a_time(tmp_path, monkeypatch):
    """Reads and deletes of many chunks go a page at a time (Chroma fails one get of more than 32,766 chunks'
    metadata: test_store.py reaches that); here pages of 7 chunks, so that each document spans several."""
    monkeypatch.setattr(chroma, "BATCH", 7)
    texts = {"one.txt": "one " * 400, "two.txt": "two " * 300}
    async with gateway(tmp_path) as http:
        counts = {}
        for name, text in texts.items():
            reply = await ingest(http, text=[text], name=[name], chunk_size="50", chunk_overlap="0")
            assert reply.status_code == 200, reply.text
            counts[name] = reply.json()["total_chunks"]
        assert min(counts.values()) > 3 * chroma.BATCH
        assert {d["name"]: d["chunks"] for d in (await http.get("/v1/dataprep/get")).json()} == counts
        replaced = await ingest(http, text=["one! " * 200], name=["one.txt"], chunk_size="50", chunk_overlap="0")
        assert replaced.json()["documents"][0]["status"] == "replaced"
        counts["one.txt"] = replaced.json()["total_chunks"]
        assert {d["name"]: d["chunks"] for d in (await http.get("/v1/dataprep/get")).json()} == counts
        deleted = await http.post("/v1/dataprep/delete", json={"file_path": "all"})
        assert deleted.json() == {"status": True, "deleted_chunks": sum(counts.values())}
        assert (await http.get("/v1/dataprep/get")).json() == []


HEAD = b'--b\r\nContent-Disposition: form-data; name="files"; filename="slow.txt"\r\nContent-Type: text/plain\r\n\r\n'
MULTIPART = {"Content-Type": "multipart/form-data; boundary=b"}


async def gauge(http: httpx.AsyncClient, name: str) -> float:
    lines = (await http.get("/metrics")).text.splitlines()
    return next((float(line.split()[1]) for line in lines if line.startswith(name + " ")), 0.0)


async def test_an_upload_still_arriving_holds_no_slot(tmp_path):
    """Its place is taken before its body is read, its slot only once the body is whole: the one slot stays free
    for a text ingest meanwhile."""
    arrived = asyncio.Event()

    async def slowly():
        yield HEAD
        await arrived.wait()
        yield b"Alpha fact.\r\n--b--\r\n"

    async with gateway(tmp_path, ingest_concurrency=1) as http:
        slow = asyncio.create_task(http.post("/v1/dataprep/ingest", content=slowly(), headers=MULTIPART))
        async with asyncio.timeout(10):
            while await gauge(http, "ingest_receiving") < 1:
                await asyncio.sleep(0.01)
            text = await ingest(http, text=["Beta fact."], name=["beta.txt"])
        assert text.status_code == 200 and not slow.done()
        arrived.set()
        reply = await slow
    assert reply.status_code == 200 and reply.json()["documents"][0]["name"] == "slow.txt", reply.text


async def test_an_upload_that_stops_arriving_is_a_408(tmp_path):
    async def stalled():
        yield HEAD
        await asyncio.Event().wait()

    async with gateway(tmp_path, upload_grace=0.2, upload_min_rate=1000) as http:
        reply = await http.post("/v1/dataprep/ingest", content=stalled(), headers=MULTIPART)
        assert reply.status_code == 408 and reply.headers["Connection"] == "close"
        assert reply.json()["error"]["code"] == "upload_too_slow"
        assert await gauge(http, "ingest_receiving") == 0 and await gauge(http, "ingest_running") == 0
