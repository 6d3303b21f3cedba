"""`python -m ovgenai_common.healthcheck PATH` (ovgenai_common/healthcheck.py): exit 0 only when this container's
service answers PATH with 200 on PORT; 1, with the reason on stderr, for anything else. The service is stood in for
by urlopen here; a real server answers in the system test."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from ovgenai_common import healthcheck
from tests.support.loopback_http import LoopbackHTTP, QuietHandler


class Response(io.BytesIO):
    def __init__(self, status: int) -> None:
        super().__init__(b"{}")
        self.status = status


@pytest.fixture
def asked(monkeypatch) -> list[tuple[str, float]]:
    """Each URL asked and its timeout; the service answers 200."""
    calls: list[tuple[str, float]] = []
    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.delenv("HEALTHCHECK_TIMEOUT", raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: calls.append((url, timeout)) or Response(200))
    return calls


def test_health_on_port_8000_by_default(asked):
    assert healthcheck.main([]) == 0
    assert asked == [("http://127.0.0.1:8000/health", 2.5)]


def test_the_path_the_port_and_the_timeout_are_the_callers(asked, monkeypatch):
    monkeypatch.setenv("PORT", "9009")
    monkeypatch.setenv("HEALTHCHECK_TIMEOUT", "7")
    assert healthcheck.main(["/v1/health_check"]) == 0
    assert asked == [("http://127.0.0.1:9009/v1/health_check", 7.0)]


def test_a_success_other_than_200_is_not_healthy(monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", lambda *_args, **_kwargs: Response(204))
    assert healthcheck.main([]) == 1


@pytest.mark.parametrize("failure", [
    urllib.error.HTTPError("http://127.0.0.1:8000/health", 503, "Service Unavailable", {}, None),
    urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
    TimeoutError("timed out"),
    ValueError("nonnumeric port"),
])
def test_an_error_status_or_no_answer_is_unhealthy_and_said(monkeypatch, capsys, failure):
    def fail(*_args, **_kwargs):
        raise failure

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    assert healthcheck.main(["/health"]) == 1
    assert capsys.readouterr().err.startswith("http://127.0.0.1:")


def test_a_timeout_that_is_not_a_number_is_unhealthy_not_a_crash(asked, monkeypatch, capsys):
    monkeypatch.setenv("HEALTHCHECK_TIMEOUT", "soon")
    assert healthcheck.main([]) == 1 and not asked
    assert "soon" in capsys.readouterr().err


class Service(QuietHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/health" else 503)
        self.end_headers()


@pytest.mark.system  # a server, and the command in a process of its own as the images run it
def test_the_command_answers_for_a_real_service():
    with LoopbackHTTP(Service) as server:
        env = {**os.environ, "PORT": str(server.port), "HEALTHCHECK_TIMEOUT": "10"}
        command = [sys.executable, "-m", "ovgenai_common.healthcheck"]
        assert subprocess.run(command, env=env, capture_output=True, timeout=30).returncode == 0
        unready = subprocess.run([*command, "/ready"], env=env, capture_output=True, text=True, timeout=30)
        assert unready.returncode == 1 and "503" in unready.stderr
