"""OPEA's link_list against a local web server on 127.0.0.1, which LINK_ALLOWED_NETWORKS allows (and nothing else
of loopback): HTML, PDF and text extracted; redirects, size and time limited; every redirect hop checked; a bad link
stores nothing. The refusal with default settings is in test_opea_parity.py."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import gateway_env
from tests.gateway.facts import minimal_pdf
from tests.gateway.pages import Page, PageServer
from tests.support.servers import RemoteServer

MAX_BYTES, TIMEOUT, REDIRECTS = 20_000, 3, 2
HTML = (b"<html><head><title>Canals</title><style>p { color: teal; }</style></head><body>"
        b"<h1>Canals</h1><p>The Moonwick canal is 42 kilometres long.</p>"
        b"<script>var secretToken = 'do-not-index';</script></body></html>")


@pytest.fixture(scope="module")
def pages():
    server = PageServer({
        "/canal.html": Page(HTML, "text/html; charset=utf-8"),
        "/comet.pdf": Page(minimal_pdf("The Quorra comet returns every 61 years."), "application/pdf"),
        "/notes.txt": Page("The café on Brindle street opens at seven.".encode("latin-1"),
                           "text/plain; charset=iso-8859-1"),
        "/hop1": Page(status=302, location="/hop2"),
        "/hop2": Page(status=301, location="/canal.html"),
        "/hop0": Page(status=302, location="/hop1"),  # three hops: one more than allowed
        "/elsewhere": Page(status=302, location="/to-loopback"),
        "/big": Page(b"x" * (MAX_BYTES + 1)),
        "/big-undeclared": Page(b"y " * MAX_BYTES, declare_length=False),
        "/image.png": Page(b"\x89PNG\r\n", "image/png"),
        "/slow": Page(b"late", hold=True),
        "/fresh.txt": Page(b"The Pellworth orchard has 300 pear trees."),
    })
    # A redirect to another loopback address, which the allowed 127.0.0.1/32 does not cover.
    server.pages["/to-loopback"] = Page(status=302, location=server.url("/canal.html", host="127.0.0.2"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(embedding_service, llm_service, tmp_path_factory):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path_factory.mktemp("links"),
                      LINK_ALLOWED_NETWORKS="127.0.0.1/32", LINK_MAX_BYTES=str(MAX_BYTES),
                      LINK_TIMEOUT=str(TIMEOUT), LINK_MAX_REDIRECTS=str(REDIRECTS))
    with RemoteServer("ovgenai_services.gateway", env=env) as server:
        yield server


def ingest(gateway, links: list[str], **fields) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/dataprep/ingest", data={"link_list": json.dumps(links), **fields},
                      timeout=120)


def listed(gateway) -> dict[str, dict]:
    return {d["id"]: d for d in httpx.post(gateway.url + "/v1/dataprep/get").json()}


def top_source(gateway, query: str) -> dict:
    return httpx.post(gateway.url + "/v1/retrieve", json={"query": query, "k": 1}).json()["sources"][0]


def test_html_pdf_and_text_links_are_extracted(gateway, pages):
    links = [pages.url("/canal.html"), pages.url("/comet.pdf"), pages.url("/notes.txt")]
    response = ingest(gateway, links)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["message"]) == (200, "Data preparation succeeded")
    assert [d["name"] for d in body["documents"]] == links and all(d["chunks"] == 1 for d in body["documents"])
    canal = top_source(gateway, "How long is the Moonwick canal?")
    assert canal["document"] == links[0] and "42 kilometres" in canal["text"]
    assert "secretToken" not in canal["text"] and "color: teal" not in canal["text"]  # scripts and styles dropped
    comet = top_source(gateway, "When does the Quorra comet return?")
    assert comet["document"] == links[1] and "61 years" in comet["text"]
    cafe = top_source(gateway, "When does the café on Brindle street open?")
    assert cafe["document"] == links[2] and "café" in cafe["text"]  # decoded by the charset the server declared
    assert {"name": links[0], "id": links[0], "type": "File", "parent": "", "chunks": 1,
            "index_name": "chatqna"} in listed(gateway).values()


def test_a_link_is_deleted_by_its_id_or_opea_txt_name(gateway, pages):
    link = pages.url("/notes.txt")
    assert ingest(gateway, [link]).status_code == 200
    opea_name = link + ".txt"  # how OPEA's guide names a link's document
    deleted = httpx.post(gateway.url + "/v1/dataprep/delete", json={"file_path": opea_name})
    assert deleted.json() == {"status": True, "deleted_chunks": 1}
    assert link not in listed(gateway)


def test_redirects_are_followed_up_to_the_limit(gateway, pages):
    followed = ingest(gateway, [pages.url("/hop1")])
    assert followed.status_code == 200, followed.text
    assert pages.url("/hop1") in listed(gateway)
    before = listed(gateway)
    too_many = ingest(gateway, [pages.url("/hop0")])
    assert too_many.status_code == 400 and f"more than {REDIRECTS} times" in too_many.json()["error"]["message"]
    assert listed(gateway) == before


def test_every_redirect_hop_is_checked(gateway, pages):
    seen = len(pages.requests)
    response = ingest(gateway, [pages.url("/elsewhere")])
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "link_list"
    assert "127.0.0.2 is a loopback address" in error["message"]
    assert pages.requests[seen:] == ["/elsewhere", "/to-loopback"]  # the refused hop was never requested


@pytest.mark.parametrize(("path", "status", "message"), [
    ("/big", 413, f"larger than {MAX_BYTES} bytes"),
    ("/big-undeclared", 413, f"larger than {MAX_BYTES} bytes"),  # counted while reading, without Content-Length
    ("/missing", 400, "answered 404"),
    ("/image.png", 400, "image/png"),
    ("/slow", 400, f"longer than {TIMEOUT} s"),
])
def test_bad_links_store_nothing_of_the_request(gateway, pages, path, status, message):
    before = listed(gateway)
    # A good link first: the bad one still fails the whole request before anything is stored.
    response = ingest(gateway, [pages.url("/fresh.txt"), pages.url(path)])
    assert response.status_code == status and message in response.json()["error"]["message"], response.text
    assert listed(gateway) == before and pages.url("/fresh.txt") not in before


def test_chunking_per_request_applies_to_links(gateway, pages):
    link = pages.url("/canal.html")
    assert ingest(gateway, [link]).json()["documents"][0]["chunks"] == 1
    response = ingest(gateway, [link], chunk_size="50", chunk_overlap="0")
    assert response.status_code == 200, response.text
    assert response.json()["documents"][0]["status"] == "replaced"  # the same page chunked anew
    assert listed(gateway)[link]["chunks"] == response.json()["documents"][0]["chunks"] >= 2
    sources = httpx.post(gateway.url + "/v1/retrieve", json={"query": "Moonwick canal", "k": 50}).json()["sources"]
    chunks = [s["text"] for s in sources if s["document"] == link]
    assert len(chunks) >= 2 and all(len(chunk) <= 50 for chunk in chunks)
