"""The packages that scripts/excluded-packages.txt keeps out of the runtime venv and the images are never needed: the
gateway, in a process where importing any of them fails as it does where they are not installed, ingests text, a PDF
and HTML, answers ChatQnA, OpenAI's chat (streamed) and a retrieval, in both of its vector stores (embedded, and a
Chroma server). The test venv itself carries them (a test crafts zstd data), hence the blocked imports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx

from tests.support.servers import ROOT, free_port, wait_until

EXCLUDED = [line.split("#")[0].strip() for line in (ROOT / "scripts/excluded-packages.txt").read_text().splitlines()
            if line.split("#")[0].strip()]

FLOW = """
import asyncio, importlib.abc, json, sys

excluded = set(sys.argv[1].split(","))


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in excluded:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)


sys.meta_path.insert(0, Absent())

import httpx

from ovgenai_services.gateway.settings import GatewaySettings
from tests.gateway.facts import minimal_pdf
from tests.gateway.fake_upstreams import EMBEDDING, LLM, FakeUpstreams
from ovgenai_services.gateway.app import create_app


async def main():
    extra = json.loads(sys.argv[3])
    settings = GatewaySettings(data_dir=sys.argv[2], embedding_endpoint=EMBEDDING, llm_endpoint=LLM, **extra)
    app = create_app(settings, transport=FakeUpstreams().transport())
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            files = [("files", ("a.txt", b"The mascot is a heron named Fitch.", "text/plain")),
                     ("files", ("b.pdf", minimal_pdf("Herons live near water."), "application/pdf")),
                     ("files", ("c.html", b"<html><body><p>Fitch was chosen in 1987.</p></body></html>",
                                "text/html"))]
            replies = [await http.post("/v1/dataprep/ingest", files=files),
                       await http.post("/v1/chatqna", json={"messages": "Who is the mascot?", "stream": False}),
                       await http.post("/v1/chat/completions", json={
                           "model": "chatqna", "stream": True, "messages": [{"role": "user", "content": "Fitch?"}]}),
                       await http.post("/v1/retrieve", json={"query": "heron", "k": 2})]
    for reply in replies:
        assert reply.status_code == 200, (reply.request.url, reply.text)
    imported = sorted(name for name in sys.modules if name.split(".")[0] in excluded)
    assert not imported, imported
    print("served without", sorted(excluded))


asyncio.run(main())
"""


def run_flow(data_dir, **settings) -> subprocess.CompletedProcess:
    import json

    return subprocess.run([sys.executable, "-c", FLOW, ",".join(EXCLUDED), str(data_dir), json.dumps(settings)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})


def test_the_list_names_the_packages_measured():
    assert EXCLUDED == ["onnxruntime", "kubernetes", "zstandard"]


def test_the_embedded_store_serves_without_the_excluded_packages(tmp_path):
    result = run_flow(tmp_path)
    assert result.returncode == 0 and "served without" in result.stdout, result.stdout + result.stderr[-3000:]


def test_a_chroma_server_serves_without_the_excluded_packages(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "chroma"), "run", "--path", str(tmp_path / "chroma"),
         "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up() -> bool:
        assert server.poll() is None, "chroma exited"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, 120, message="chroma server")
        result = run_flow(tmp_path / "gateway", vector_store="server", chroma_host="127.0.0.1", chroma_port=port)
        assert result.returncode == 0 and "served without" in result.stdout, result.stdout + result.stderr[-3000:]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)
