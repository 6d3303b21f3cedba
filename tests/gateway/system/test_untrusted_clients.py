"""No client takes the gateway from the others: JSON bodies stay within the JSON limit and the shared JSON rules
whatever their encoding or Content-Type headers, OPEA's chat_template cannot ask for a prompt larger than a
request, and uploads sent slowly hold no ingest slot and have a deadline.

The first gateway's LLM and embedding services are addresses nobody listens on: every request to it is refused
before a call. The second (`paced_gateway`) ingests and reranks through a stand-in embedding service that counts
its requests (and stands in for the LLM service's health)."""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.gateway.stand_ins import EmbeddingStandIn
from tests.support.replies import refused
from tests.support.servers import RemoteServer, free_port, wait_until


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    nowhere = f"http://127.0.0.1:{free_port()}"
    env = {"EMBEDDING_SERVER_ENDPOINT": nowhere, "LLM_SERVER_ENDPOINT": nowhere,
           "DATA_DIR": str(tmp_path_factory.mktemp("gateway-data"))}
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as server:
        yield server


def test_a_json_body_past_the_json_limit_is_refused_whatever_the_headers(gateway):
    """JSON then text/plain: the gate counted it as an upload (64 MiB), FastAPI parsed it as JSON (limit 4 MiB)."""
    big = json.dumps({"messages": "x" * (5 * 1024 * 1024)}).encode()
    for headers in ([("Content-Type", "application/json"), ("Content-Type", "text/plain")],
                    [("Content-Type", "text/plain"), ("Content-Type", "application/json")]):
        refused(httpx.post(gateway.url + "/v1/chatqna", content=big, headers=headers, timeout=60),
                "content_type_repeated")
    reply = httpx.post(gateway.url + "/v1/chatqna", content=big, headers={"Content-Type": "application/json"})
    assert reply.status_code == 413


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "nonsense",
                                          "application/json, text/plain"])
@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_past_the_json_limit_is_refused_whatever_its_type(gateway, content_type, chunked):
    """Only ingestion takes uploads (64 MiB): a 5 MB body of any other type was read whole on the chat route, then
    refused with a 400, as FastAPI does not parse text/plain as JSON."""
    big = json.dumps({"messages": "x" * (5 * 1024 * 1024)}).encode()
    content = (big[start:start + 65536] for start in range(0, len(big), 65536)) if chunked else big
    reply = httpx.post(gateway.url + "/v1/chatqna", content=content, headers={"Content-Type": content_type},
                       timeout=60)
    assert reply.status_code == 413 and "4194304 bytes" in reply.json()["error"]["message"], reply.text[:300]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_json_in_another_encoding_is_400(gateway, encoding):
    body = json.dumps({"messages": "hi \ud800", "stream": False}).encode(encoding)
    reply = httpx.post(gateway.url + "/v1/chatqna", content=body, headers={"Content-Type": "application/json"})
    refused(reply, "json_not_utf8")


def test_a_chat_template_cannot_fill_a_prompt_larger_than_a_request(gateway):
    """A 28 KB request made a 5.2 MB prompt before anything refused it."""
    body = {"messages": "q" * 5_000, "chat_template": "{question}" * 1_000, "stream": False}
    reply = httpx.post(gateway.url + "/v1/chatqna", json=body, timeout=30)
    refused(reply, "chat_template_too_large", "chat_template")


def test_a_lone_surrogate_in_a_json_form_field_is_400(gateway):
    """OPEA's link_list is JSON inside a form: a link holding \\ud800 was a 500 where it became a URL."""
    reply = httpx.post(gateway.url + "/v1/dataprep/ingest", data={"link_list": '["http://127.0.0.1:9/\\ud800"]'},
                       timeout=30)
    refused(reply, "invalid_json", "link_list")


# ---- slow senders -------------------------------------------------------------------------------------------------

GRACE = 10  # UPLOAD_GRACE: seconds any upload may take before the minimum rate applies
MIN_RATE = 1000  # UPLOAD_MIN_RATE, bytes per second; a Trickle sends 2


@pytest.fixture(scope="module")
def upstream():
    stand_in = EmbeddingStandIn()
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def paced_gateway(upstream, tmp_path_factory):
    env = {"EMBEDDING_SERVER_ENDPOINT": upstream.url, "LLM_SERVER_ENDPOINT": upstream.url,
           "DATA_DIR": str(tmp_path_factory.mktemp("paced")), "UPLOAD_GRACE": str(GRACE),
           "UPLOAD_MIN_RATE": str(MIN_RATE), "RERANK_SERVER_ENDPOINT": upstream.url}
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as server:
        yield server


class Trickle:
    """A multipart upload of `size` bytes whose head is sent at once and whose content follows one byte every
    `interval` seconds (a thread sends it), on a socket of its own; the gateway's answer is read as it comes."""

    def __init__(self, url: str, size: int = 10_000, interval: float = 0.5):
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
        head = (f'--b\r\nContent-Disposition: form-data; name="files"; filename="slow-{id(self)}.txt"\r\n'
                "Content-Type: text/plain\r\n\r\n").encode()
        tail = b"\r\n--b--\r\n"
        self.sock.sendall(f"POST /v1/dataprep/ingest HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: multipart/"
                          f"form-data; boundary=b\r\nContent-Length: {len(head) + size + len(tail)}\r\n\r\n".encode()
                          + head)
        self.reply = b""
        self.stopped = threading.Event()
        self.sender = threading.Thread(target=self._send, args=(size, interval), daemon=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.sender.start()
        self.reader.start()

    def _send(self, size: int, interval: float) -> None:
        for _ in range(size):
            if self.stopped.wait(interval):
                return
            try:
                self.sock.sendall(b"x")
            except OSError:  # the gateway closed the connection
                return

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.reply += data

    def answered(self) -> bool:
        return b"\r\n\r\n" in self.reply and self.reply.endswith(b"}")

    def status(self) -> int:
        return int(self.reply.split(b" ", 2)[1])

    def error(self) -> dict:
        return json.loads(self.reply.split(b"\r\n\r\n", 1)[1])["error"]

    def __enter__(self) -> Trickle:
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.sock.close()


def metric(server: RemoteServer, name: str) -> float:
    """A gauge of the gateway's /metrics (0 when it has no such gauge)."""
    for line in httpx.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_slow_uploads_do_not_hold_ingestion(paced_gateway):
    """Two uploads trickling a byte every 4 s held both ingest slots (INGEST_CONCURRENCY 2): a 60-byte text ingest
    had no answer within 20 s. Slots are now taken once a body has arrived."""
    with Trickle(paced_gateway.url) as one, Trickle(paced_gateway.url) as two:
        wait_until(lambda: metric(paced_gateway, "ingest_running") + metric(paced_gateway, "ingest_receiving") >= 2,
                   10, message="both uploads in flight")
        reply = httpx.post(paced_gateway.url + "/v1/dataprep/ingest", timeout=GRACE - 2,
                           data={"text": "A small note about fair shares: sixty bytes of plain text.", "name": "n"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["documents"] == [{"name": "n", "chunks": 1, "status": "ingested"}]
        assert not one.answered() and not two.answered()  # still arriving: the text did not wait for them


def test_an_upload_below_the_minimum_rate_is_refused(paced_gateway):
    """The limit was per read (BODY_TIMEOUT, 60 s): a byte every 0.5 s held a slot for as long as it kept coming."""
    started = time.monotonic()
    with Trickle(paced_gateway.url) as slow:
        wait_until(slow.answered, GRACE + 20, message="the gateway's answer to a trickled upload")
        elapsed = time.monotonic() - started
        slow.reader.join(10)
        assert not slow.reader.is_alive()  # the gateway closed the connection: the trickle holds nothing more
    assert slow.status() == 408, slow.reply[:300]
    error = slow.error()
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "upload_too_slow", error
    assert elapsed >= GRACE  # never refused before its grace period


# ---- probes -------------------------------------------------------------------------------------------------------

OPEA_BODY = {"Service Title": "opea_service@chatqna_gateway/MicroService", "Version": "1.0",
             "Service Description": "OPEA Microservice Infrastructure"}


def test_open_probes_say_up_or_down_only_and_run_no_inference(paced_gateway, upstream):
    """/health listed the store's chunk count, and every probe ran a rerank on the embedding service when a reranker
    was set: anyone could load it without a key."""
    assert httpx.post(paced_gateway.url + "/v1/dataprep/ingest", data={"text": "Probe fact.", "name": "p"},
                      timeout=60).status_code == 200
    before = upstream.inference()
    for _ in range(5):
        health, opea = httpx.get(paced_gateway.url + "/health"), httpx.get(paced_gateway.url + "/v1/health_check")
        assert health.status_code == 200 and health.json() == {"status": "ok"}, health.text
        assert opea.status_code == 200 and opea.json() == OPEA_BODY, opea.text
        assert httpx.get(paced_gateway.url + "/live").json() == {"status": "alive"}
    assert upstream.inference() == before  # the upstreams' own health endpoints were asked, nothing else
    assert upstream.requests["/health"] >= 5
