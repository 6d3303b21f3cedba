"""Gateway behaviour across restarts, store modes and failing dependencies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

from tests.conftest import gateway_env
from tests.support.servers import ROOT, RemoteServer, free_port, wait_until

FACT = "The Brindle tower has 212 steps."


def ingest(url: str, text: str = FACT, name: str = "tower.txt") -> httpx.Response:
    return httpx.post(url + "/v1/dataprep/ingest", data={"text": [text], "name": [name]}, timeout=60)


def test_no_documents_answers_from_model_and_says_so(embedding_service, llm_service, tmp_path):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path)
    with RemoteServer("ovgenai_services.gateway", env=env) as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions",
                           json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 10},
                           timeout=60).json()
        assert reply["sources"] == [] and "No documents" in reply["retrieval"]
        assert reply["choices"][0]["message"]["content"]


def test_embedded_store_survives_restart(embedding_service, llm_service, tmp_path):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path)
    with RemoteServer("ovgenai_services.gateway", env=env) as gw:
        assert ingest(gw.url).status_code == 200
    with RemoteServer("ovgenai_services.gateway", env=env) as gw:
        listed = httpx.get(gw.url + "/v1/dataprep/get").json()
        assert [d["name"] for d in listed] == ["tower.txt"]
        sources = httpx.post(gw.url + "/v1/retrieve", json={"query": "How many steps has the Brindle tower?"}).json()
        assert FACT in sources["sources"][0]["text"]


def test_server_store_mode_with_a_real_chroma_server(embedding_service, llm_service, tmp_path):
    port = free_port()
    chroma = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "chroma"), "run", "--path", str(tmp_path / "chroma"),
         "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        def up() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 60, message="chroma server")
        env = gateway_env(embedding_service.url, llm_service.url, tmp_path / "gw", VECTOR_STORE="server",
                          CHROMA_HOST="127.0.0.1", CHROMA_PORT=str(port))
        with RemoteServer("ovgenai_services.gateway", env=env) as gw:
            assert ingest(gw.url).json()["documents"][0]["chunks"] == 1
            assert "server" in httpx.get(gw.url + "/health/details").json()["dependencies"]["vector_store"]
        with RemoteServer("ovgenai_services.gateway", env=env) as gw:  # a second gateway replica sees the same data
            assert [d["name"] for d in httpx.get(gw.url + "/v1/dataprep/get").json()] == ["tower.txt"]
        assert not (tmp_path / "gw" / "chroma").exists()
    finally:
        chroma.send_signal(signal.SIGTERM)
        chroma.wait(20)


def test_embedding_down_stores_nothing(llm_service, tmp_path):
    env = gateway_env(f"http://127.0.0.1:{free_port()}", llm_service.url, tmp_path)
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as gw:
        response = ingest(gw.url)
        assert response.status_code == 503 and "embedding" in response.json()["error"]["message"]
        assert httpx.get(gw.url + "/v1/dataprep/get").json() == []
        assert httpx.get(gw.url + "/v1/health_check").status_code == 503


def test_llm_down_then_back(embedding_service, backend, default_model, tmp_path):
    llm_port = free_port()
    env = gateway_env(embedding_service.url, f"http://127.0.0.1:{llm_port}", tmp_path)
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/live") as gw:
        ingest(gw.url)
        question = {"messages": "How many steps has the Brindle tower?", "max_tokens": 20}
        down = httpx.post(gw.url + "/v1/chatqna", json=question, timeout=60)
        assert down.status_code == 503 and down.json()["error"]["type"] == "unavailable_error"
        llm_env = {"LLM_ENDPOINT": backend.url, "LLM_MODEL": default_model}
        with RemoteServer("ovgenai_services.llm", env=llm_env, port=llm_port, health_path="/v1/health_check"):
            back = httpx.post(gw.url + "/v1/chatqna", json=question, timeout=60)
            assert back.status_code == 200 and back.text.rstrip().endswith("data: [DONE]")


@pytest.mark.usefixtures("default_model")
def test_upload_size_limit(embedding_service, llm_service, tmp_path):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path, MAX_UPLOAD_BYTES="1000")
    with RemoteServer("ovgenai_services.gateway", env=env) as gw:
        big = [("files", ("big.txt", b"x " * 2000, "text/plain"))]
        response = httpx.post(gw.url + "/v1/dataprep/ingest", files=big)
        assert response.status_code == 413 and "limit" in response.json()["error"]["message"]
        assert not list((tmp_path / "uploads").rglob("*.txt"))


def test_gateway_module_is_importable_without_side_effects():
    result = subprocess.run([sys.executable, "-c", "import ovgenai_services.gateway.app"], cwd=ROOT, timeout=60)
    assert result.returncode == 0
