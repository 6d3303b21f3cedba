"""The engine process's pieces (engine/engine_process/entry.py): it dies with the API process however that one dies, its
sends wait while the API process lives and stop when it is gone, and its pipeline is warmed up before it says it is
ready (on the real pipeline: a system test)."""

from __future__ import annotations

import ctypes
import os
import signal

import msgspec
import pytest
import zmq

from ovgenai_server.engine.contract.messages import Failed, FromEngine
from ovgenai_server.engine.engine_process import entry as process
from ovgenai_server.engine.engine_process.entry import ParentGone, die_with_parent, loaded_path
from ovgenai_server.models.specs import base_spec
from ovgenai_server.settings import BackendSettings


class Exited(Exception):
    """os._exit, stood in for: the test goes on to say with what code."""


@pytest.fixture
def exits(monkeypatch) -> list[int]:
    codes: list[int] = []

    def exit_(code: int) -> None:
        codes.append(code)
        raise Exited

    monkeypatch.setattr(os, "_exit", exit_)
    return codes


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def prctl(self, option: int, value: int) -> int:
        self.calls.append((option, value))
        return 0


def test_the_engine_asks_to_be_killed_with_its_parent(monkeypatch, exits):
    libc = FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda *_args, **_kwargs: libc)
    monkeypatch.setattr(os, "getppid", lambda: 4242)
    die_with_parent(4242)
    assert libc.calls == [(1, signal.SIGKILL)] and not exits  # PR_SET_PDEATHSIG


def test_a_parent_gone_before_the_request_took_effect_ends_the_engine(monkeypatch, exits):
    monkeypatch.setattr(ctypes, "CDLL", lambda *_args, **_kwargs: FakeLibc())
    monkeypatch.setattr(os, "getppid", lambda: 1)  # adopted: the parent died first
    with pytest.raises(Exited):
        die_with_parent(4242)
    assert exits == [0]


def test_without_prctl_the_polling_checks_are_left_to_notice(monkeypatch, exits):
    def missing(*_args, **_kwargs):
        raise OSError("no libc here")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    monkeypatch.setattr(os, "getppid", lambda: 1)
    die_with_parent(4242)
    assert not exits


class FullQueue:
    """An output socket whose queue is full for the first `full` sends."""

    def __init__(self, full: int) -> None:
        self.full = full
        self.sent: list[bytes] = []

    def send(self, data, copy: bool = True) -> None:  # noqa: ARG002 - zmq's signature
        if self.full:
            self.full -= 1
            raise zmq.Again()
        self.sent.append(bytes(data))


def test_a_send_waits_while_the_api_process_lives(monkeypatch):
    monkeypatch.setattr(os, "getppid", lambda: 4242)
    socket = FullQueue(full=3)
    process._sender(socket, 4242)(Failed(error="boom"))
    [data] = socket.sent
    assert msgspec.msgpack.Decoder(FromEngine).decode(data) == Failed(error="boom") and socket.full == 0


def test_a_send_to_an_api_process_that_is_gone_stops_the_engine(monkeypatch):
    monkeypatch.setattr(os, "getppid", lambda: 1)
    socket = FullQueue(full=1)
    with pytest.raises(ParentGone):
        process._sender(socket, 4242)(Failed(error="boom"))
    assert not socket.sent


def test_a_model_is_loaded_from_its_own_files_unless_its_weights_are_compressed(tmp_path):
    (tmp_path / "openvino_model.xml").write_text("<net/>")
    spec = base_spec(BackendSettings(model=str(tmp_path)), "m", tmp_path)
    assert loaded_path(spec) == tmp_path
