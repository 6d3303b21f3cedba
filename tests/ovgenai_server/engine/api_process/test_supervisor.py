"""The engine process's supervisor (engine/api_process/supervisor.py), on stand-in processes: a process that dies is
started again and its requests told why; one that fails before it was ever ready stops the server with its reason;
closing asks it to shut down. (The real process's restarts: tests/ovgenai_server/system/test_resilience.py.)"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ovgenai_server.engine.api_process import supervisor as supervisor_module
from ovgenai_server.engine.api_process.supervisor import EngineSupervisor
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.models.specs import base_spec
from ovgenai_server.settings import BackendSettings
from tests.support.waiting import until


class StandIn:
    """A process as the supervisor sees it: its sentinel readable once it has died."""

    def __init__(self):
        self._read, self._write = os.pipe()
        self.sentinel, self.pid, self.exitcode = self._read, 4242, None

    def die(self, code: int = -9) -> None:
        self.exitcode = code
        os.close(self._write)

    def is_alive(self) -> bool:
        return self.exitcode is None

    def join(self, timeout=None) -> None:  # noqa: ARG002 - the real signature
        pass

    def kill(self) -> None:
        self.die()


@pytest.fixture
def spawned(monkeypatch):
    monkeypatch.setattr(supervisor_module, "RESTART_BACKOFF_SECONDS", (0,))
    processes: list[StandIn] = []

    def spawn(self):
        processes.append(StandIn())
        self._process = processes[-1]
        return processes[-1]

    monkeypatch.setattr(EngineSupervisor, "_spawn", spawn)
    return processes


def supervisor(serve, stopped) -> EngineSupervisor:
    return EngineSupervisor(base_spec(BackendSettings(), "m", Path("/models/m")), ("ipc://a", "ipc://b"), "INFO",
                            "text", serve, stopped)


async def test_a_process_that_dies_is_started_again_and_its_requests_told(spawned):
    stops: list[str] = []
    engine = supervisor(lambda: asyncio.Event().wait(), stops.append)
    engine.start()
    await until(lambda: len(spawned) == 1)
    assert engine.health().state is EngineState.LOADING
    engine.ready()
    assert engine.health().state is EngineState.AVAILABLE and engine.pid() == 4242
    spawned[0].die()
    await until(lambda: len(spawned) == 2)
    assert stops == ["exit code -9"] and engine.fatal_error is None
    await engine.close(lambda: spawned[-1].die(0))
    assert engine.health().state is EngineState.FAILED and "retry" in engine.health().message


async def test_a_model_that_never_loads_stops_the_server_with_its_reason(spawned):
    told: list[str] = []

    async def fails():
        engine.failed("cannot read model.gguf")  # the process's Failed message, before any Ready

    engine = supervisor(fails, lambda _reason: None)
    engine.on_fatal = told.append
    engine.start()
    await until(lambda: told)
    assert told == ["cannot read model.gguf"] and engine.fatal_error == told[0] and len(spawned) == 1
    await engine.close(lambda: None)
