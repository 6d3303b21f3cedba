"""Memory and responsiveness of a real gateway process under hostile documents: compression bombs served by a
loopback web server (which LINK_ALLOWED_NETWORKS allows) and an 8 MiB upload of small HTML tags each leave the
process's peak resident memory within 200 MB of where it started, and /live keeps answering meanwhile.

The peak is the kernel's (VmHWM in /proc/<pid>/status), reset before each case through /proc/<pid>/clear_refs, so a
spike between two samples is not missed. The worst /live latency is printed (`pytest -s`), not asserted: it depends
on the machine."""

from __future__ import annotations

import json
import threading
import time
import zlib
from pathlib import Path

import httpx
import pytest

from tests.conftest import gateway_env
from tests.gateway.pages import Page, PageServer
from tests.support.servers import RemoteServer, free_port

MB = 1_000_000
PEAK_ROOM = 200 * MB


def compressed_zeros(size: int, compressor) -> bytes:
    """`size` zero bytes through `compressor` (compress/flush), a block at a time: never held decompressed."""
    block = bytes(1 << 20)
    return b"".join([*(compressor.compress(block) for _ in range(size // len(block))), compressor.flush()])


def gzip_compressor():
    return zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)


@pytest.fixture(scope="module")
def bombs():
    import zstandard  # a test tool (the dev extra): the runtime venv, which the unit tier collects in, has none

    gzip_bomb = compressed_zeros(1 << 30, gzip_compressor())  # 1 GiB in ~1 MiB
    zstd_bomb = compressed_zeros(1 << 29, zstandard.ZstdCompressor(level=19).compressobj())  # 512 MiB in ~16 KiB
    nested = gzip_compressor()
    nested_bomb = nested.compress(compressed_zeros(1 << 29, gzip_compressor())) + nested.flush()  # 512 MiB, ~2 KiB
    server = PageServer({
        "/gzip.txt": Page(gzip_bomb, "text/plain", headers={"Content-Encoding": "gzip"}),
        "/zstd.txt": Page(zstd_bomb, "text/plain", headers={"Content-Encoding": "zstd"}),
        "/nested.txt": Page(nested_bomb, "text/plain", headers={"Content-Encoding": "gzip, gzip"}),
    })
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(embedding_service, tmp_path_factory):
    # No LLM: ingestion does not need one (readiness is not waited for, /live is).
    env = gateway_env(embedding_service.url, f"http://127.0.0.1:{free_port()}", tmp_path_factory.mktemp("bounds"),
                      LINK_ALLOWED_NETWORKS="127.0.0.1/32")
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as server:
        yield server


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class Peak:
    """The process's resident memory before, and its peak while the block runs."""

    def __init__(self, pid: int):
        self.pid = pid

    def __enter__(self) -> Peak:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
        self.before = status_kb(self.pid, "VmRSS") * 1024
        return self

    def __exit__(self, *exc) -> None:
        self.peak = status_kb(self.pid, "VmHWM") * 1024

    @property
    def growth(self) -> int:
        return self.peak - self.before


class LiveProbe(threading.Thread):
    """GET /live over and over with a 1 s timeout, recording each latency and any failure."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url + "/live"
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=1) as client:
            # At least one probe, however quickly the work under test ends: a refusal can take less time than a
            # thread takes to start.
            while True:
                started = time.perf_counter()
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError as error:
                    ok, error_name = False, type(error).__name__
                else:
                    error_name = "status"
                self.latencies.append(time.perf_counter() - started)
                if not ok:
                    self.failures.append(error_name)
                if self.done.wait(0.02):
                    return

    def __enter__(self) -> LiveProbe:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.join()

    def report(self, case: str) -> str:
        return f"{case}: /live answered {len(self.latencies)} probes, worst {max(self.latencies) * 1000:.0f} ms"


def ingest_link(gateway, link: str) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/dataprep/ingest", data={"link_list": json.dumps([link])}, timeout=300)


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/gzip.txt", 413, "larger than"),  # decoded up to LINK_MAX_BYTES, then refused
    ("/zstd.txt", 400, "Content-Encoding 'zstd'"),  # no decoder with an output bound: refused unread
    ("/nested.txt", 400, "stacked content encodings"),
])
def test_compression_bombs_stay_within_bounds(gateway, bombs, path, status, says):
    with LiveProbe(gateway.url) as probe, Peak(gateway.process.pid) as peak:
        response = ingest_link(gateway, bombs.url(path))
    print(probe.report(path), f"peak +{peak.growth / MB:.0f} MB")  # noqa: T201 - the report the docstring names
    assert peak.growth < PEAK_ROOM, f"peak grew by {peak.growth / MB:.0f} MB"
    assert probe.latencies and probe.failures == []
    assert response.status_code == status and says in response.json()["error"]["message"], response.text
    assert httpx.get(gateway.url + "/v1/dataprep/get").json() == []


def test_an_html_upload_of_eight_mebibytes_stays_within_bounds(gateway, tmp_path):
    # About a million empty elements, and one fact: a tree builder keeps an object for each element.
    fact = "<p>The Moonwick canal is 42 kilometres long.</p>"
    body = "<b></b>" * ((8 * 2**20 - len(fact)) // 7)
    path = tmp_path / "tags.html"
    path.write_text(f"<html><body>{body[: len(body) // 2]}{fact}{body[len(body) // 2:]}</body></html>")
    assert path.stat().st_size >= 8 * 2**20
    with LiveProbe(gateway.url) as probe, Peak(gateway.process.pid) as peak, path.open("rb") as handle:
        response = httpx.post(gateway.url + "/v1/dataprep/ingest", files={"files": ("tags.html", handle)},
                              timeout=600)
    print(probe.report("8 MiB HTML"), f"peak +{peak.growth / MB:.0f} MB")  # noqa: T201
    assert peak.growth < PEAK_ROOM, f"peak grew by {peak.growth / MB:.0f} MB"
    assert probe.latencies and probe.failures == []
    assert response.status_code == 200, response.text
    assert response.json()["documents"] == [{"name": "tags.html", "chunks": 1, "status": "ingested"}]
    [source] = httpx.post(gateway.url + "/v1/retrieve", json={"query": "Moonwick canal", "k": 1}).json()["sources"]
    assert "42 kilometres" in source["text"]


def test_html_beyond_max_html_bytes_is_refused_unparsed(gateway, tmp_path):
    path = tmp_path / "big.html"
    path.write_text("<p>" + "x" * (10 * 2**20) + "</p>")  # MAX_HTML_BYTES is 10 MiB by default
    with path.open("rb") as handle:
        response = httpx.post(gateway.url + "/v1/dataprep/ingest", files={"files": ("big.html", handle)}, timeout=300)
    assert response.status_code == 413 and "MAX_HTML_BYTES" in response.json()["error"]["message"], response.text
    assert "big.html" not in {d["name"] for d in httpx.get(gateway.url + "/v1/dataprep/get").json()}
