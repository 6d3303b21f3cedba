"""compose's optional Chroma server has a healthcheck that works in its image (bash only: no curl, wget or Python)
and means what it says: run as compose runs it, it passes against a real Chroma server, and fails where nothing
listens and where the heartbeat path answers anything but 200."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys

import httpx
import pytest
import yaml

from tests.support.compose import COMPOSE
from tests.support.loopback_http import LoopbackHTTP
from tests.support.servers import free_port, wait_until

CHROMA = yaml.safe_load(COMPOSE.read_text())["services"]["chroma"]
LISTENS = "/dev/tcp/127.0.0.1/8000"  # Chroma's port in its image, the one the gateway's CHROMA_PORT names


def healthcheck(port: int) -> subprocess.CompletedProcess:
    """The compose healthcheck as compose runs it ('$$' is a literal '$'), pointed at `port`."""
    kind, *command = CHROMA["healthcheck"]["test"]
    assert kind == "CMD" and command[0] == "bash"  # the image has bash, and no curl, wget or Python
    command = [part.replace("$$", "$") for part in command]
    assert LISTENS in command[-1]
    command[-1] = command[-1].replace(LISTENS, f"/dev/tcp/127.0.0.1/{port}")
    return subprocess.run(command, capture_output=True, text=True, timeout=10)


def test_the_healthcheck_watches_the_port_the_gateway_uses():
    gateway = yaml.safe_load(COMPOSE.read_text())["services"]["chatqna-gateway"]["environment"]
    assert gateway["CHROMA_PORT"].endswith(":-8000}") and LISTENS in CHROMA["healthcheck"]["test"][-1]


@pytest.fixture
def chroma(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "chroma"), "run", "--path", str(tmp_path / "chroma"),
         "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )

    def up() -> bool:
        assert server.poll() is None, "chroma exited"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, 120, message="chroma server")
        yield port
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)


def test_a_running_chroma_server_is_healthy(chroma):
    result = healthcheck(chroma)
    assert result.returncode == 0, result.stderr


def test_nothing_listening_is_unhealthy():
    assert healthcheck(free_port()).returncode != 0


def test_a_server_that_answers_the_heartbeat_with_an_error_is_unhealthy():
    """A listening port is not enough: the heartbeat must answer 200 (a plain file server answers 404)."""
    with LoopbackHTTP(http.server.SimpleHTTPRequestHandler) as server:
        assert httpx.get(f"{server.url}/api/v2/heartbeat").status_code == 404
        assert healthcheck(server.port).returncode != 0
