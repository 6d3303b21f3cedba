"""The backend's app factory and start-up path (app.py): the routes it serves and the state it sets, the models its
lifespan loads and closes around the fronts' hooks, and the start-up decisions (exit 2 for what cannot be served,
exit 3 for a model that could not load, the engines' cores). Models are the fake engine's; nothing is loaded."""

from __future__ import annotations

import signal
from contextlib import asynccontextmanager
from dataclasses import replace

import httpx
import pytest
from fastapi import APIRouter

from ovgenai_server import app as backend_app
from ovgenai_server.app import create_app, placed, resolve, serve
from ovgenai_server.models import registry as served_models
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FakeRuntime, fake_model


@pytest.fixture()
def cpu_spec(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    return load_model_specs(BackendSettings(model=str(tmp_path)))[0]


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_the_openai_routes_are_served_under_v1_and_v3_beside_the_services_own():
    extra = APIRouter()

    @extra.get("/extra")
    async def extra_route() -> dict:
        return {"extra": True}

    app = create_app(BackendSettings(), [fake_model()], routers=[extra])
    async with client(app) as http:
        for prefix in ("/v1", "/v3"):
            listed = (await http.get(f"{prefix}/models")).json()
            assert [card["id"] for card in listed["data"]] == ["fake-model"], prefix
        assert (await http.get("/models")).status_code == 404  # only under a version
        assert (await http.get("/health")).status_code == 200
        assert (await http.post("/tokenize", json={"prompt": "one two"})).json()["tokens"] == [3, 3]
        assert (await http.get("/extra")).json() == {"extra": True}
        assert "ovgenai:prompt_tokens_total" in (await http.get("/metrics")).text


def test_the_state_holds_the_models_the_limits_and_the_metrics_registry():
    app = create_app(BackendSettings(max_n=3, max_waiting_requests=7, max_queue_wait=9), [fake_model()])
    state = app.state.server
    assert state.models.names() == ["fake-model"]
    assert (state.limits.max_n, state.limits.max_waiting_requests, state.limits.max_queue_wait) == (3, 7, 9)
    assert app.state.registry.get_sample_value("ovgenai:engine_available", {"model_name": "fake-model"}) == 1.0
    assert app.state.fatal_error is None


def _recording_hook(events: list[str], name: str):
    @asynccontextmanager
    async def hook(app):
        events.append(f"{name} up with {app.state.server.models.names()}")
        yield
        events.append(f"{name} down")

    return hook


class ClosingRuntime(FakeRuntime):
    def __init__(self, events: list[str]):
        super().__init__()
        self.log = events

    async def start(self) -> None:
        self.log.append("engine started")

    async def close(self) -> None:
        self.log.append("engine closed")


async def test_the_lifespan_loads_each_model_then_runs_the_hooks_and_stops_in_reverse(monkeypatch, cpu_spec):
    events: list[str] = []
    loaded = []

    def load(spec, _settings, on_fatal):
        loaded.append(on_fatal)
        return fake_model(ClosingRuntime(events), name=spec.name)

    monkeypatch.setattr(served_models, "load_openvino_model", load)
    app = create_app(BackendSettings(), specs=[cpu_spec],
                     hooks=[_recording_hook(events, "first"), _recording_hook(events, "second")])
    assert app.state.server.models.names() == []
    async with app.router.lifespan_context(app):
        assert app.state.server.models.names() == [cpu_spec.name]
    assert events == ["engine started", f"first up with {[cpu_spec.name]}", f"second up with {[cpu_spec.name]}",
                      "second down", "first down", "engine closed"]
    raised = []
    monkeypatch.setattr(signal, "raise_signal", raised.append)
    loaded[0]("a-model: out of memory")  # a model that cannot be loaded at all stops the server
    assert app.state.fatal_error == "a-model: out of memory" and raised == [signal.SIGTERM]


async def test_injected_models_are_the_callers_to_close():
    events: list[str] = []
    app = create_app(BackendSettings(), [fake_model(ClosingRuntime(events))])
    async with app.router.lifespan_context(app):
        pass
    assert events == []


def test_resolve_gives_the_specs_whose_devices_are_present(monkeypatch, cpu_spec):
    from ovgenai_server.models import devices

    monkeypatch.setattr(devices, "available_devices", lambda: ["CPU"])
    [spec] = resolve(BackendSettings(model=str(cpu_spec.path)))
    assert spec.path == cpu_spec.path and spec.device == "CPU"


@pytest.mark.parametrize(("values", "reason"), [
    ({"model": "/no/such/model"}, "does not exist"),
    ({"device": "NPU"}, "Device 'NPU' is not available on this machine; available devices: CPU."),
])
def test_resolve_exits_2_with_what_cannot_be_served(monkeypatch, cpu_spec, capsys, values, reason):
    from ovgenai_server.models import devices

    monkeypatch.setattr(devices, "available_devices", lambda: ["CPU"])
    with pytest.raises(SystemExit) as exited:
        resolve(BackendSettings(**{"model": str(cpu_spec.path), **values}))
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and reason in error


def test_placing_specs_without_a_cpu_engine_leaves_the_cores_alone(cpu_spec, monkeypatch):
    from ovgenai_server.engine.api_process import placement

    monkeypatch.setattr(placement, "plan", lambda *_: pytest.fail("planned"))
    gpu = replace(cpu_spec, device="GPU")
    assert placed([gpu], "auto") == [gpu]


@pytest.fixture
def started(monkeypatch) -> list:
    """serve()'s start-up with nothing run: the specs resolved as given, the app run and handed back."""
    ran: list = []
    monkeypatch.setattr(backend_app, "resolve", lambda _settings: [])
    monkeypatch.setattr(backend_app, "bound", lambda _settings: None)  # the port: not taken in a unit test
    monkeypatch.setattr(backend_app, "run_app", lambda app, settings, _sock: ran.append((app, settings)))
    return ran


async def test_serve_runs_the_app_with_the_fronts_routers(started, tmp_path):
    extra = APIRouter()

    @extra.get("/front")
    async def front_route() -> dict:
        return {"front": True}

    serve(BackendSettings(model=str(tmp_path), port=9123), routers=[extra])
    [(app, settings)] = started
    assert settings.port == 9123
    async with client(app) as http:
        assert (await http.get("/front")).json() == {"front": True}


def test_serve_exits_3_when_a_model_could_not_load(started, monkeypatch, tmp_path, capsys):  # noqa: ARG001
    monkeypatch.setattr(backend_app, "run_app",
                        lambda app, _settings, _sock: setattr(app.state, "fatal_error", "m: no"))
    with pytest.raises(SystemExit) as exited:
        serve(BackendSettings(model=str(tmp_path)))
    assert exited.value.code == 3 and "could not load m: no" in capsys.readouterr().err


def test_pull_prepares_the_source_and_serves_nothing(started, monkeypatch, tmp_path):
    from ovgenai_models import handoff

    prepared = []
    monkeypatch.setattr(handoff, "prepare_models_with_tools", lambda *args: prepared.append(args))
    serve(BackendSettings(pull=True, source_model="o/m", model_repository_path=tmp_path))
    assert [args[:2] for args in prepared] == [(tmp_path, "o/m")] and not started


def test_a_source_that_cannot_be_prepared_exits_2(started, monkeypatch, tmp_path, capsys):
    from ovgenai_models import handoff
    from ovgenai_models.errors import ExportError

    def fail(*_args):
        raise ExportError("no such repository")

    monkeypatch.setattr(handoff, "prepare_models_with_tools", fail)
    with pytest.raises(SystemExit) as exited:
        serve(BackendSettings(source_model="o/m", model_repository_path=tmp_path))
    assert exited.value.code == 2 and "no such repository" in capsys.readouterr().err and not started


def test_auto_leaves_a_thread_count_the_user_chose_alone(cpu_spec, monkeypatch):
    from ovgenai_server.engine.api_process import placement

    monkeypatch.setattr(placement, "usable_cores", lambda: tuple(range(16)))
    monkeypatch.setattr(placement, "cpu_quota", lambda: None)
    pinned: list = []
    monkeypatch.setattr(placement, "pin_this_process", pinned.append)
    told = replace(cpu_spec, plugin_config={"INFERENCE_NUM_THREADS": 16})  # as the Helm chart sets it
    assert placed([told], "auto") == [told] and not pinned
    [reserved] = placed([cpu_spec], "auto")
    assert reserved.engine_cores == tuple(range(15)) and pinned == [(15,)]


def test_a_gpu_engine_is_not_placed(cpu_spec):
    gpu = replace(cpu_spec, device="GPU")
    assert placed([gpu], "reserved") == [gpu]
