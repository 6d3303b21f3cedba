"""Each launch script, in native mode (this machine has no Docker engine), starts its service."""

from __future__ import annotations

import os
import signal
import subprocess

import httpx
import pytest

from tests.support.servers import MODELS, ROOT, free_port, wait_until


def launch(script: str, args: list[str], env: dict[str, str], health: str, first_line_says: str) -> None:
    port = free_port()
    log = ROOT / ".cache" / f"{script}.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(["bash", f"scripts/{script}", "-p", str(port), *args], cwd=ROOT,
                                   env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        def up() -> bool:
            assert process.poll() is None, log.read_text()[-2000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}{health}", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 180, interval=0.25, message=script)
        first = log.read_text().splitlines()[0]
        assert first_line_says in first and "(native" in first
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)


@pytest.mark.usefixtures("default_model")
def test_backend_script_native():
    launch("launch_vllm_service_openvino.sh", ["--native", "-m", str(MODELS)], {}, "/health", "backend")


def test_llm_script_native(backend, default_model):
    launch("launch_microservice.sh", ["--native", "-e", backend.url, "-m", default_model], {}, "/v1/health_check",
           "LLM microservice")


def test_embedding_script_native():
    launch("launch_embedding_service.sh", ["--native", "-m", str(MODELS / "sentence-transformers/all-MiniLM-L6-v2")],
           {}, "/v1/health_check", "embedding")


def test_gateway_script_native(embedding_service, llm_service, tmp_path):
    launch("launch_gateway.sh", ["--native", "-l", llm_service.url, "-e", embedding_service.url, "-d",
                                 str(tmp_path)], {}, "/v1/health_check", "gateway")
