"""Listen first, on real services: a busy port stops the service at once, naming the port, before anything loads;
a service answers 503 with Retry-After while it loads, not "connection refused"."""

from __future__ import annotations

import socket
import subprocess
import sys

import httpx
import pytest

from tests.support.servers import ROOT, free_port, wait_until


def test_a_busy_port_is_said_at_once_naming_it():
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        for module in ("ovgenai_services.llm", "ovgenai_server"):
            done = subprocess.run([sys.executable, "-m", module, "--model", str(ROOT / "models")] if module ==
                                  "ovgenai_server" else [sys.executable, "-m", module], cwd=ROOT, capture_output=True,
                                  text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PORT": str(port),
                                                                "LLM_ENDPOINT": "http://127.0.0.1:9"})
            assert done.returncode == 2, (module, done.stderr[-500:])
            assert f"port {port} on 127.0.0.1 is in use" in done.stderr, done.stderr[-500:]
            assert "engine" not in done.stderr.lower(), done.stderr[-500:]  # nothing loaded first


def test_a_service_answers_while_it_loads(default_model):  # noqa: ARG001 - the embedding model prepared
    """The embedding service loads its model (and times f32 against bf16) before it can embed: its port answers
    from the start, 503 with Retry-After until it is ready."""
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PORT": str(port),
           "EMBEDDING_MODEL_PATH": str(ROOT / "models/sentence-transformers/all-MiniLM-L6-v2")}
    process = subprocess.Popen([sys.executable, "-m", "ovgenai_services.embedding"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    answers: list[httpx.Response] = []

    def answered() -> bool:
        try:
            answers.append(httpx.get(f"http://127.0.0.1:{port}/health", timeout=5))
        except httpx.TransportError:  # not listening yet: the interpreter still starting
            return False
        return answers[-1].status_code == 200

    try:
        wait_until(answered, 120, interval=0.02, message="the embedding service ready")
    finally:
        process.terminate()
        process.wait(30)
    for loading in answers[:-1]:
        assert loading.status_code == 503 and loading.headers["Retry-After"] == "5", loading.text


def test_a_service_serves_https_with_a_key_and_certificate_and_its_health_check_asks_it(tmp_path):
    """vLLM's --ssl-keyfile and --ssl-certfile (uvicorn's), here SSL_KEYFILE and SSL_CERTFILE for every service."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=llm.example", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PORT": str(port), "LLM_ENDPOINT": "http://127.0.0.1:9",
           "SSL_KEYFILE": str(key), "SSL_CERTFILE": str(cert)}
    process = subprocess.Popen([sys.executable, "-m", "ovgenai_services.llm"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def live() -> bool:
        try:
            return httpx.get(f"https://127.0.0.1:{port}/live", verify=str(cert), timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(live, 60, interval=0.05, message="the service over https")
        probe = subprocess.run([sys.executable, "-m", "ovgenai_common.healthcheck", "/live"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=30)
        assert probe.returncode == 0, probe.stderr
        with pytest.raises(httpx.TransportError):  # plain http is not served
            httpx.get(f"http://127.0.0.1:{port}/live", timeout=5)
    finally:
        process.terminate()
        process.wait(30)
