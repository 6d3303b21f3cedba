"""Shared fixtures: the real backend on the default model, started once per session."""

from __future__ import annotations

import pytest

from tests.support.servers import DEFAULT_MODEL, MODELS, RemoteServer


def pytest_collection_modifyitems(items):
    for item in items:
        if "system" in item.nodeid.split("::")[0]:
            item.add_marker(pytest.mark.system)


@pytest.fixture(scope="session")
def default_model() -> str:
    if not (MODELS / DEFAULT_MODEL / "model.gguf").is_file():
        pytest.fail("default models are missing; run `make models` (make test does it)")
    return DEFAULT_MODEL


@pytest.fixture(scope="session")
def backend(default_model):  # noqa: ARG001 - depends on the model being prepared
    """The backend as users start it, on the default model repository."""
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--max_n", "4"]) as server:
        yield server
