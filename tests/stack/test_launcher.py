"""`up` with its supervisor faked (no process starts): services started in order, each after those it needs are
healthy; the exit codes of a stack stopped by Ctrl-C, by a dying service, by one never healthy, and by models that
cannot be prepared; what it says about access. The real launcher: system/test_stack_launcher.py."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ovgenai_models.errors import ExportError
from ovgenai_services.stack import launcher
from ovgenai_services.stack.services import StackSettings, plan
from ovgenai_services.stack.supervisor import ServiceDied


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("API_KEY", "HOST", "LLM_MODEL_ID", "EMBEDDING_MODEL_ID", "RERANK_MODEL_ID"):
        monkeypatch.delenv(name, raising=False)
    for name in ("no_proxy", "NO_PROXY"):  # `up` adds the loopback names: restored after the test
        monkeypatch.setenv(name, "")


class FakeSupervisor:
    """Records what the launcher asks; `ending` is what watching the running stack raises."""

    ending: BaseException = KeyboardInterrupt()
    healthy_never: str | None = None

    def __init__(self, services):
        self.services = services
        self.calls: list[str] = []
        self.said: list[str] = []
        self.restarts = {s.name: type("Restarts", (), {"total": 2})() for s in services}
        FakeSupervisor.last = self

    def say(self, text: str) -> None:
        self.said.append(text)

    def start(self, service, index: int) -> None:
        self.calls.append(f"start {service.name} {index}")

    def wait_healthy(self, service, timeout: float) -> None:
        if service.name == self.healthy_never:
            raise TimeoutError(f"{service.name} was not healthy within {timeout:.0f}s")
        self.calls.append(f"healthy {service.name}")

    def watch(self) -> None:
        raise self.ending

    def stop_all(self) -> None:
        self.calls.append("stop all")


@pytest.fixture
def stack(monkeypatch):
    monkeypatch.setattr(launcher, "Supervisor", FakeSupervisor)
    monkeypatch.setattr(launcher, "stop_on_signals", lambda: None)  # the test process keeps its own handlers
    monkeypatch.setattr(launcher, "prepare", lambda _settings: None)
    monkeypatch.setattr(launcher.ports, "taken", lambda _host, _port: False)  # whatever this machine runs
    monkeypatch.setattr(FakeSupervisor, "ending", KeyboardInterrupt())
    monkeypatch.setattr(FakeSupervisor, "healthy_never", None)
    return StackSettings(models=Path("repo"), startup_timeout=5)


def test_services_start_after_those_they_need_and_ctrl_c_stops_them(stack):
    assert launcher.up(stack) == 0
    calls = FakeSupervisor.last.calls
    assert calls.index("healthy backend") < calls.index("start llm 2")
    assert calls.index("healthy embedding") < calls.index("start gateway 3")
    assert calls[-1] == "stop all"
    assert any("all services are healthy" in text for text in FakeSupervisor.last.said)


def test_a_service_that_keeps_dying_stops_the_stack_with_its_last_lines(stack):
    backend = plan(stack)[0]
    FakeSupervisor.ending = ServiceDied(backend, 3, [f"line {i}" for i in range(20)])
    assert launcher.up(stack) == 1
    said = FakeSupervisor.last.said
    assert "stack    | backend died (exit code 3) after 2 restart(s); giving up; its last lines:" in said
    assert "stack    |   line 19" in said and "stack    |   line 4" not in said  # the last 15
    assert FakeSupervisor.last.calls[-1] == "stop all"


def test_a_service_never_healthy_stops_the_stack(stack):
    FakeSupervisor.healthy_never = "embedding"
    assert launcher.up(stack) == 1
    assert "stack    | embedding was not healthy within 5s" in FakeSupervisor.last.said
    assert "start gateway 3" not in FakeSupervisor.last.calls


def test_models_that_cannot_be_prepared_exit_2_before_anything_starts(stack, monkeypatch, capsys):
    def fail(_settings):
        raise ExportError("no such model")

    monkeypatch.setattr(launcher, "prepare", fail)
    FakeSupervisor.last = None
    assert launcher.up(stack) == 2
    assert FakeSupervisor.last is None and "cannot prepare the models: no such model" in capsys.readouterr().err


def test_the_banner_shows_the_ports_and_the_key_header_only_with_a_key():
    settings = StackSettings(gateway_port=1, llm_port=2, backend_port=3, embedding_port=4)
    text = launcher.banner(settings)
    assert "http://localhost:1/" in text and "http://localhost:3/v3/chat/completions" in text
    assert "Authorization" not in text
    assert "Authorization: Bearer $API_KEY" in launcher.banner(StackSettings(api_key="k"))


@pytest.mark.parametrize(("settings", "says"), [
    ({"api_key": "k"}, "every route but the probes needs the API key"),
    ({"host": "127.0.0.1"}, "for this machine only"),
    ({"host": "0.0.0.0"}, "WARNING: no API key while listening on 0.0.0.0"),
])
def test_access_says_who_can_reach_the_stack(settings, says):
    assert says in launcher.access(StackSettings(**settings))


def test_ctrl_c_and_sigterm_stop_the_launcher_even_when_sigint_was_ignored():
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        launcher.stop_on_signals()
        for number in saved:
            with pytest.raises(KeyboardInterrupt):
                signal.getsignal(number)(number, None)
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


@pytest.mark.usefixtures("stack")
def test_a_taken_port_stops_the_stack_before_anything_is_prepared_naming_the_variable_that_moves_it(
        monkeypatch, capsys):
    monkeypatch.setattr(launcher.ports, "taken", lambda _host, port: port in (8888, 8008))
    monkeypatch.setattr(launcher.ports, "holder",
                        lambda port: "pid 42 (python3 -m http.server)" if port == 8888 else None)
    monkeypatch.setattr(launcher, "prepare", lambda _settings: pytest.fail("prepared with a port taken"))
    FakeSupervisor.last = None
    assert launcher.up(StackSettings(models=Path("repo"))) == 1
    err = capsys.readouterr().err
    assert FakeSupervisor.last is None
    assert ("port 8888 (gateway) is already in use by pid 42 (python3 -m http.server): stop that program, or move "
            "the gateway with GATEWAY_PORT=8889") in err
    assert "port 8008 (backend) is already in use by another program" in err and "BACKEND_PORT=8009" in err
    assert "--backend_port 8009" in err


@pytest.mark.parametrize("said", [
    "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8888): address already in use",
    "error: port 8888 on 127.0.0.1 is in use by another program: stop it, or set PORT (or --port) to another",
])
def test_a_service_that_died_on_a_taken_port_is_said_so(stack, monkeypatch, said):
    gateway = plan(stack)[3]
    FakeSupervisor.ending = ServiceDied(gateway, 1, [said])
    monkeypatch.setattr(launcher.ports, "holder", lambda _port: None)
    assert launcher.up(stack) == 1
    assert any("move the gateway with GATEWAY_PORT=" in line for line in FakeSupervisor.last.said)
