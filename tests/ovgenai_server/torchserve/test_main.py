"""`python -m ovgenai_server.torchserve` (torchserve/__main__.py): a Transformers checkpoint as MODEL_PATH is served as
its export, what cannot start exits 2 with the reason, and the backend is served with TorchServe's routes and its
side ports (management, metrics, gRPC), which start with the engines and stop before them. Nothing listens here:
the side servers and the gRPC server are stood in for (the real ones: system/test_torchserve.py)."""

from __future__ import annotations

import asyncio
import logging
import signal

import pytest

from ovgenai_models.errors import ExportError
from ovgenai_server import app as backend_app
from ovgenai_server.app import create_app
from ovgenai_server.torchserve import __main__ as entry
from ovgenai_server.torchserve import checkpoint, grpc_server
from ovgenai_server.torchserve.http import router
from ovgenai_server.torchserve.settings import TorchServeSettings
from tests.support.fake_engine import fake_model


@pytest.fixture(autouse=True)
def _no_logging_set_up(monkeypatch):
    monkeypatch.setattr(entry, "setup_logging", lambda *_args: None)


def checkpoint_in(folder):
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"0")
    return folder


def test_a_model_that_is_not_a_checkpoint_is_served_as_it_is(tmp_path):
    settings = TorchServeSettings(model=str(tmp_path))
    assert entry.from_checkpoint(settings) is settings


@pytest.mark.parametrize(("values", "name", "fmt"), [
    ({}, "hf", "fp16"),
    ({"model_name": "llama", "quantization": "4bit"}, "llama", "int4"),
    ({"served_model_name": "served", "dtype": "float32"}, "served", "fp32"),
])
def test_a_checkpoint_is_served_as_its_export_under_model_name_or_its_folders(tmp_path, monkeypatch, values, name,
                                                                                fmt):
    asked = []
    monkeypatch.setattr(checkpoint, "exported", lambda *args: asked.append(args) or tmp_path / "ir")
    folder = checkpoint_in(tmp_path / "hf")
    served = entry.from_checkpoint(TorchServeSettings(model=str(folder), cache_dir=tmp_path / "cache", **values))
    assert (served.model, served.model_name, served.quantization) == (str(tmp_path / "ir"), name, "none")
    assert asked == [(folder, tmp_path / "cache", fmt)]  # the weights already as QUANTIZATION asks


def test_the_backend_is_served_with_torchserves_routes_and_side_ports(monkeypatch):
    served = []
    monkeypatch.setattr(backend_app, "serve", lambda *args, **kwargs: served.append((*args, *kwargs.values())))
    entry.main(["--model_name", "llama", "--inference_address", "http://127.0.0.1:9080"])
    [(settings, hooks, routers)] = served
    assert (settings.served_model_name, settings.port) == ("llama", 9080) and routers == [router]
    assert len(hooks) == 1 and callable(hooks[0])


def test_a_config_file_that_cannot_be_read_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        entry.main(["--ts-config", str(tmp_path / "missing.properties")])
    assert exited.value.code == 2 and "error: Cannot read TorchServe's config file" in capsys.readouterr().err


def test_a_checkpoint_that_cannot_be_exported_exits_2(tmp_path, monkeypatch, capsys):
    def fail(*_args):
        raise ExportError("optimum-intel is not installed")

    monkeypatch.setattr(checkpoint, "exported", fail)
    monkeypatch.setattr(backend_app, "serve", lambda *_args, **_kwargs: pytest.fail("served"))
    with pytest.raises(SystemExit) as exited:
        entry.main(["--model", str(checkpoint_in(tmp_path / "hf"))])
    assert exited.value.code == 2 and "error: optimum-intel is not installed" in capsys.readouterr().err


class FakeGrpc:
    def __init__(self) -> None:
        self.stopped: list[float | None] = []

    async def stop(self, grace: float | None) -> None:
        self.stopped.append(grace)


async def test_the_side_ports_start_with_the_app_and_stop_before_the_engines(monkeypatch, caplog):
    grpc, grpc_started, sides = FakeGrpc(), [], []

    async def start_grpc(state, settings):
        await asyncio.sleep(0)  # as the real one waits for its server: the side servers' tasks run meanwhile
        grpc_started.append((state, settings))
        return grpc, 7071

    async def serve(server, sockets=None):  # noqa: ARG001 - uvicorn's signature
        sides.append(server)

    monkeypatch.setattr(grpc_server, "start_grpc", start_grpc)
    monkeypatch.setattr(entry._SideServer, "serve", serve)
    settings = TorchServeSettings(management_address="http://0.0.0.0:9081", metrics_address="http://127.0.0.1:9082")
    app = create_app(settings.backend(), [fake_model()])
    with caplog.at_level(logging.WARNING):
        async with entry.side_servers(settings)(app):
            assert app.state.torchserve is settings and app.state.grpc_port == 7071
            assert grpc_started == [(app.state.server, settings)]
            assert [(s.config.host, s.config.port) for s in sides] == [("0.0.0.0", 9081), ("127.0.0.1", 9082)]
            assert not grpc.stopped
    assert grpc.stopped == [0] and all(side.should_exit for side in sides)
    # The management port is open to other machines without a key: said once, for that port only.
    [warning] = [r.getMessage() for r in caplog.records if "without an API key" in r.getMessage()]
    assert warning.startswith("TorchServe management API: listening on 0.0.0.0")


def test_the_side_servers_leave_the_signals_to_the_inference_server():
    before = signal.getsignal(signal.SIGTERM)
    with entry._SideServer.capture_signals(None):
        assert signal.getsignal(signal.SIGTERM) is before
