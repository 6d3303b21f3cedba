"""Another program on a service's port, for real: a stand-in HTTP server that answers 200 on every path, as the
foreign server in the issue did (the stack said "all services are healthy" and restarted the gateway for ever).
The launcher stops before anything starts, naming the port, the program and the variable that moves the service;
the supervisor never counts that server's answers as a service's health; a service whose port is taken while it
restarts stops the stack instead of being restarted into it."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from ovgenai_services.stack import ports
from ovgenai_services.stack.services import Service
from ovgenai_services.stack.supervisor import PortTaken, Supervisor
from tests.support.loopback_http import LoopbackHTTP, QuietHandler
from tests.support.servers import ROOT, free_port, wait_until


class _Answers200(QuietHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.reply(200, {"status": "ok"})


def foreign_server(port: int) -> LoopbackHTTP:
    return LoopbackHTTP(_Answers200, port)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def http_server_service(name: str, port: int, listens_on: int | None = None) -> Service:
    """A service that is `python -m http.server` (its health path, /, answers 200), on `listens_on` (default its
    own port)."""
    return Service(name, "http.server", port, "/", env={"HOST": "127.0.0.1"},
                   args=[str(listens_on or port), "--bind", "127.0.0.1", "--directory", str(ROOT / "docs")],
                   port_variable=f"{name.upper()}_PORT")


def test_the_launcher_names_the_taken_port_and_the_variable_that_moves_it_before_preparing_anything(tmp_path):
    taken = free_port()
    others = {name: free_port() for name in ("backend", "embedding", "llm")}
    with foreign_server(taken):
        result = subprocess.run(
            [sys.executable, "-m", "ovgenai_services.stack", "up", "--models", str(tmp_path / "no-models"),
             "--data", str(tmp_path), "--gateway_port", str(taken),
             *[x for name, port in others.items() for x in (f"--{name}_port", str(port))]],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={k: v for k, v in os.environ.items() if not k.endswith(("MODEL_ID", "_PORT")) and k != "HOST"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"port {taken} (gateway) is already in use by pid {os.getpid()}" in result.stderr
    assert "move the gateway with GATEWAY_PORT=" in result.stderr and "all services are healthy" not in result.stdout
    assert not (tmp_path / "no-models").exists()  # stopped before preparing the models


def test_a_foreign_server_s_answer_is_never_a_service_s_health():
    port, elsewhere = free_port(), free_port()
    # The service runs (on another port), and a foreign server answers 200 on the one it was given.
    service = http_server_service("gateway", port, listens_on=elsewhere)
    supervisor = Supervisor([service], color=False)
    supervisor.start(service, 0)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{elsewhere}/"), 30, 0.1, "the service")
        with foreign_server(port):
            assert httpx.get(f"http://127.0.0.1:{port}/v1/health_check").status_code == 200
            assert ports.held_by_session(port, supervisor.processes["gateway"].pid) is False
            assert not supervisor.healthy(service)
            with pytest.raises(PortTaken, match=f"port {port} \\(gateway\\) is already in use by pid {os.getpid()}"):
                supervisor.wait_healthy(service, timeout=10)
    finally:
        supervisor.stop_all()


def test_a_service_is_healthy_on_its_own_port_and_not_restarted_into_a_taken_one(capsys):
    port = free_port()
    service = http_server_service("gateway", port)
    supervisor = Supervisor([service], color=False, first_backoff=0.05)
    supervisor.start(service, 0)
    try:
        supervisor.wait_healthy(service, timeout=30)
        assert ports.held_by_session(port, supervisor.processes["gateway"].pid) is True
        with pytest.raises(PortTaken, match=f"port {port} \\(gateway\\) is already in use"):
            supervisor.start(service, 0)  # a second one on the same port is refused before it starts
        supervisor.processes["gateway"].terminate()  # it dies; another program takes its port
        supervisor.processes["gateway"].wait(10)
        with foreign_server(port), pytest.raises(PortTaken, match="GATEWAY_PORT="):
            supervisor.watch(interval=0.02)
        out = capsys.readouterr().out
        assert "gateway is healthy again" not in out and "restarting gateway (restart" not in out
    finally:
        supervisor.stop_all()
