"""`python -m ovgenai_common.healthcheck PATH` (ovgenai_common/healthcheck.py): exit 0 only when this container's
service answers PATH with 200 on PORT; 1, with the reason on stderr, for anything else; never through a proxy. The
service is stood in for by the probe's opener here; a real server (and a proxy) answer in the system tests."""

from __future__ import annotations

import email.message
import io
import urllib.error
import urllib.request

import pytest

from ovgenai_common import healthcheck
from tests.support.loopback_http import QuietHandler


class Response(io.BytesIO):
    def __init__(self, status: int) -> None:
        super().__init__(b"{}")
        self.status = self.code = status
        self.msg = "OK"

    def info(self) -> email.message.Message:
        return email.message.Message()


@pytest.fixture
def asked(monkeypatch) -> list[tuple[str, float]]:
    """Each URL asked and its timeout; the service answers 200."""
    calls: list[tuple[str, float]] = []
    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.delenv("HEALTHCHECK_TIMEOUT", raising=False)
    monkeypatch.delenv("SSL_CERTFILE", raising=False)
    monkeypatch.setattr(healthcheck.DIRECT, "open", lambda url, timeout: calls.append((url, timeout)) or Response(200))
    return calls


def test_health_on_port_8000_by_default(asked):
    assert healthcheck.main([]) == 0
    assert asked == [("http://127.0.0.1:8000/health", 2.5)]


def test_the_path_the_port_and_the_timeout_are_the_callers(asked, monkeypatch):
    monkeypatch.setenv("PORT", "9009")
    monkeypatch.setenv("HEALTHCHECK_TIMEOUT", "7")
    assert healthcheck.main(["/v1/health_check"]) == 0
    assert asked == [("http://127.0.0.1:9009/v1/health_check", 7.0)]


def test_a_service_serving_tls_is_asked_over_https(asked, monkeypatch):
    monkeypatch.setenv("SSL_CERTFILE", "/certs/chain.pem")
    assert healthcheck.main([]) == 0
    assert asked == [("https://127.0.0.1:8000/health", 2.5)]


def test_a_success_other_than_200_is_not_healthy(monkeypatch):
    monkeypatch.setattr(healthcheck.DIRECT, "open", lambda *_args, **_kwargs: Response(204))
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

    monkeypatch.setattr(healthcheck.DIRECT, "open", fail)
    assert healthcheck.main(["/health"]) == 1
    assert capsys.readouterr().err.startswith("http://127.0.0.1:")


def test_a_timeout_that_is_not_a_number_is_unhealthy_not_a_crash(asked, monkeypatch, capsys):
    monkeypatch.setenv("HEALTHCHECK_TIMEOUT", "soon")
    assert healthcheck.main([]) == 1 and not asked
    assert "soon" in capsys.readouterr().err


PROXIES = ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY")


def test_the_probe_ignores_the_environment_s_proxy(monkeypatch):
    """urlopen sent 127.0.0.1 to http_proxy when no_proxy did not name it: a proxy cannot reach the container's
    loopback, so a healthy service was marked unhealthy."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    sent = []

    def http_open(_handler, request):  # where the request would connect, instead of connecting
        sent.append((request.host, request.has_proxy()))
        return Response(200)

    monkeypatch.setattr(urllib.request.HTTPHandler, "http_open", http_open)
    assert healthcheck.main([]) == 0
    assert sent == [("127.0.0.1:8000", False)]


class Service(QuietHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/health" else 503)
        self.end_headers()


class Proxy(QuietHandler):
    """A forward proxy that reaches nothing: it records what it is asked and answers 502, as one outside the
    container would for its 127.0.0.1."""

    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.asked.append(self.path)  # a proxy is asked for the whole URL
        self.send_response(502)
        self.end_headers()
