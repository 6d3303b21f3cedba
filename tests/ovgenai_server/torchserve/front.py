"""The TorchServe front on a fake engine, for its tests: the backend's app with TorchServe's inference routes and
its settings, as the front's start-up leaves them (torchserve/__main__.py)."""

from __future__ import annotations

from fastapi import FastAPI

from ovgenai_server.app import create_app
from ovgenai_server.torchserve.http import router
from ovgenai_server.torchserve.settings import TorchServeSettings
from tests.support.fake_engine import FakeRuntime, fake_model

EOS = "<|endoftext|>"


def front(runtime: FakeRuntime, **values) -> tuple[FastAPI, TorchServeSettings]:
    settings = TorchServeSettings(**values)
    app = create_app(settings.backend(), [fake_model(runtime)], routers=[router])
    app.state.torchserve = settings  # as the front's start-up sets it (torchserve/__main__.py)
    return app, settings
