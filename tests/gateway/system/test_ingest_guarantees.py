"""An acknowledged document is whole, or absent, in a real gateway process: killed with SIGKILL in the middle of an
ingest and restarted on the same DATA_DIR, it shows nothing of the document, has swept the upload's spool folder,
and ingests it again whole; concurrent ingests of one name end with one version; ingests beyond
INGEST_BODIES and INGEST_QUEUE are refused with a 429 in OpenAI's shape, and one beyond the places but within the
queue waits for one.

The ingest is caught mid-way without sleeping: small chunks embedded two at a time make it five hundred round trips
to the embedding service, and the test polls the gateway's own count of chunks written (/metrics) until some are.
An ingest whose client leaves is cancelled, with nothing of it left behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import httpx
from langchain_text_splitters import RecursiveCharacterTextSplitter

from tests.conftest import gateway_env
from tests.gateway.pages import Page, PageServer
from tests.support.servers import RemoteServer, free_port, wait_until

CHUNK = {"chunk_size": "60", "chunk_overlap": "0"}


def paragraphs(word: str, count: int) -> str:
    return "\n\n".join(f"{word} fact {i}: the canal lock {i} opens at dawn." for i in range(count))


def chunk_count(text: str) -> int:
    return len(RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0).split_text(text))


def env_for(embedding_service, data_dir, **extra: str) -> dict[str, str]:
    # No LLM: ingestion does not need one (readiness is not waited for, /live is).
    return gateway_env(embedding_service.url, f"http://127.0.0.1:{free_port()}", data_dir, **extra)


def upload(url: str, name: str, text: str) -> httpx.Response:
    return httpx.post(url + "/v1/dataprep/ingest", files={"files": (name, text.encode())}, data=CHUNK, timeout=600)


def listed(url: str) -> dict[str, int]:
    return {d["name"]: d["chunks"] for d in httpx.get(url + "/v1/dataprep/get").json()}


def metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def stored_chunks(data_dir) -> int:
    """Every chunk in the embedded store, committed or not, read by chromadb in a process of its own."""
    code = ("import sys, chromadb; from chromadb.config import Settings; "
            "client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False)); "
            "print(client.get_collection('chatqna').count())")
    out = subprocess.run([sys.executable, "-c", code, str(data_dir / "chroma")], capture_output=True, text=True,
                         check=True, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    return int(out.stdout.split()[-1])


def in_background(call) -> threading.Thread:
    thread = threading.Thread(target=lambda: _swallow(call), daemon=True)
    thread.start()
    return thread


def _swallow(call) -> None:
    try:
        call()
    except httpx.HTTPError:
        pass  # the gateway was killed under it


def test_a_kill_mid_ingest_leaves_nothing_partial_and_no_spooled_upload(embedding_service, tmp_path):
    text = paragraphs("Alpha", 1000)
    total = chunk_count(text)
    env = env_for(embedding_service, tmp_path, EMBED_BATCH_SIZE="2", INGEST_CONCURRENCY="1", INGEST_BODIES="1",
                  INGEST_QUEUE="0")
    gateway = RemoteServer("ovgenai_services.gateway", env=env, health_path="/live")
    try:
        ingest = in_background(lambda: upload(gateway.url, "long.txt", text))
        wait_until(lambda: metric(gateway.url, "ingest_chunks_written_total") >= 20, 300, message="chunks written")
        # The one place is taken and nothing may wait: another ingest is refused at once, in OpenAI's shape.
        busy = upload(gateway.url, "other.txt", "Beta fact.")
        assert busy.status_code == 429, busy.text
        assert busy.json()["error"]["type"] == "rate_limit_error" and "INGEST_BODIES" in busy.text
        assert listed(gateway.url) == {}  # nothing of the document is visible while it is written
        assert [p.name for p in (tmp_path / "uploads").iterdir()]  # the upload is spooled
        gateway.process.kill()
        gateway.process.wait()
        ingest.join()
    finally:
        gateway.stop()
    assert 0 < stored_chunks(tmp_path) < total  # the kill landed mid-way: part of the document was stored

    # Restarted on the same DATA_DIR, embedding in full batches (two at a time only made the ingest long to kill).
    restarted = env_for(embedding_service, tmp_path)
    with RemoteServer("ovgenai_services.gateway", env=restarted, health_path="/live") as gateway:
        assert listed(gateway.url) == {}
        assert list((tmp_path / "uploads").iterdir()) == []  # the killed ingest's spool folder is swept
        response = upload(gateway.url, "long.txt", text)
        assert response.status_code == 200, response.text
        assert response.json()["documents"] == [{"name": "long.txt", "chunks": total, "status": "ingested"}]
        assert listed(gateway.url) == {"long.txt": total}
    assert stored_chunks(tmp_path) == total


def test_an_ingest_whose_client_leaves_is_cancelled_with_nothing_of_it_stored(embedding_service, tmp_path):
    """The client closes its connection mid-ingest: the gateway stops embedding, removes the chunks written so far
    and frees the ingest's slot at once (it used to embed the rest for nobody, holding the slot for minutes)."""
    text = paragraphs("Alpha", 1000)
    total = chunk_count(text)
    env = env_for(embedding_service, tmp_path, EMBED_BATCH_SIZE="2", INGEST_CONCURRENCY="1", INGEST_BODIES="1",
                  INGEST_QUEUE="0")
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as gateway:
        request = httpx.Request("POST", gateway.url + "/v1/dataprep/ingest",
                                files={"files": ("long.txt", text.encode())}, data=CHUNK)
        head = "".join(f"{key}: {value}\r\n" for key, value in request.headers.items())
        with socket.create_connection(("127.0.0.1", gateway.port)) as connection:
            connection.sendall(f"POST /v1/dataprep/ingest HTTP/1.1\r\n{head}\r\n".encode() + request.read())
            wait_until(lambda: metric(gateway.url, "ingest_chunks_written_total") >= 20, 300,
                       message="chunks written")
        wait_until(lambda: metric(gateway.url, "ingest_running") == 0, 60, message="the ingest to be cancelled")
        assert metric(gateway.url, "ingest_chunks_written_total") < total  # stopped, not finished
        assert listed(gateway.url) == {}
        # The slot is free again (with it taken, and no queue, this would be a 429).
        assert upload(gateway.url, "other.txt", "Beta fact.").status_code == 200
        assert listed(gateway.url) == {"other.txt": 1}
    assert stored_chunks(tmp_path) == 1  # the cancelled ingest's chunks are gone, not only hidden


def test_concurrent_ingests_of_one_name_end_with_one_version(embedding_service, tmp_path):
    texts = {"Alpha": paragraphs("Alpha", 150), "Beta": paragraphs("Beta", 120)}
    env = env_for(embedding_service, tmp_path, EMBED_BATCH_SIZE="1")
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as gateway:
        barrier = threading.Barrier(len(texts))
        responses: dict[str, httpx.Response] = {}

        def send(word: str) -> None:
            barrier.wait()
            responses[word] = upload(gateway.url, "same.txt", texts[word])

        threads = [threading.Thread(target=send, args=(word,)) for word in texts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(r.status_code == 200 for r in responses.values()), [r.text for r in responses.values()]
        statuses = sorted(r.json()["documents"][0]["status"] for r in responses.values())
        assert statuses == ["ingested", "replaced"]
        [(name, chunks)] = listed(gateway.url).items()
        assert name == "same.txt" and chunks in {chunk_count(t) for t in texts.values()}
        sources = httpx.post(gateway.url + "/v1/retrieve", json={"query": "canal lock fact", "k": 50}).json()
        assert len({s["text"].split()[0] for s in sources["sources"]}) == 1  # every chunk from one version
    assert stored_chunks(tmp_path) == chunks


def test_an_ingest_beyond_the_slots_waits_in_the_queue(embedding_service, tmp_path):
    # The first ingest holds the one slot for as long as its link's server holds the answer: the second waits
    # behind it for exactly that long, and no longer than the test needs to see it waiting.
    pages = PageServer({"/held.txt": Page(b"Alpha fact: the canal opens at dawn.", hold=True)})
    env = env_for(embedding_service, tmp_path, INGEST_CONCURRENCY="1", INGEST_BODIES="1", INGEST_QUEUE="1",
                  LINK_ALLOWED_NETWORKS="127.0.0.1/32")
    try:
        with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as gateway:
            responses: dict[str, httpx.Response] = {}

            def send(name: str, call) -> threading.Thread:
                thread = threading.Thread(target=lambda: responses.update({name: call()}))
                thread.start()
                return thread

            link = pages.url("/held.txt")
            first = send(link, lambda: httpx.post(gateway.url + "/v1/dataprep/ingest",
                                                  data={"link_list": json.dumps([link])}, timeout=120))
            wait_until(lambda: "/held.txt" in pages.requests, 60, message="the first ingest fetching its link")
            second = send("second.txt", lambda: upload(gateway.url, "second.txt", "Beta fact: the canal has a lock."))
            wait_until(lambda: metric(gateway.url, "ingest_waiting") == 1, 60, message="a waiting ingest")
            assert "second.txt" not in responses
            pages.released.set()
            first.join()
            second.join()
            assert [responses[n].status_code for n in (link, "second.txt")] == [200, 200], responses
            assert set(listed(gateway.url)) == {link, "second.txt"}
            assert metric(gateway.url, "ingest_refused_total") == 0
    finally:
        pages.stop()
