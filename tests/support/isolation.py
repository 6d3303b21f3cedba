"""What a unit test may not do: start a process, listen on a socket, build an inference pipeline or read a prepared
model. Each is replaced, for the length of a test without the `system` marker, by a call that fails the test with
what it did, so the unit tier (`make test-unit`) stays fast and needs nothing but the venv."""

from __future__ import annotations

import importlib
import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import MODELS

MARKER = "system"
# openvino_genai's classes that load a model or compile one (a tokenizer loads its model too).
PIPELINES = ("LLMPipeline", "ContinuousBatchingPipeline", "VLMPipeline", "TextEmbeddingPipeline",
             "TextRerankPipeline", "Tokenizer")


class StartsSomething(AssertionError):
    """Raised where a unit test starts what only a system test may."""


def _refusal(what: str) -> Callable[..., Any]:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise StartsSomething(f"this test {what}: mark it @pytest.mark.{MARKER} (or put it under a system/ folder), "
                              "or give it a fake")

    return refuse


def forbid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace, until the test ends, every way a test could start a process, a server or a pipeline."""
    monkeypatch.setattr(subprocess.Popen, "__init__", _refusal("starts a process (subprocess)"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", _refusal("starts a process (multiprocessing)"))
    monkeypatch.setattr(os, "fork", _refusal("forks a process"))
    monkeypatch.setattr(os, "posix_spawn", _refusal("starts a process (posix_spawn)"))
    monkeypatch.setattr(socket.socket, "listen", _refusal("starts a server (it listens on a socket)"))
    # Servers whose sockets are opened in C, out of the socket module's sight.
    for module, names in (("grpc", ("server",)), ("grpc.aio", ("server",)), ("zmq", ("Socket.bind",))):
        _forbid_in(monkeypatch, module, names)
    _forbid_in(monkeypatch, "openvino_genai", PIPELINES, "(a real pipeline)")
    _forbid_prepared_models(monkeypatch)


def _forbid_prepared_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenVINO may read and compile a model a unit test builds (a fake), not one of the prepared models (the
    embedding service reads its model with openvino.Core, not through a pipeline)."""
    try:
        import openvino
    except ImportError:
        return
    for name in ("read_model", "compile_model"):
        original = getattr(openvino.Core, name)

        def guarded(core: Any, model: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if isinstance(model, str | os.PathLike) and Path(model).resolve().is_relative_to(MODELS):
                _refusal(f"reads the prepared model {model}")()
            return _original(core, model, *args, **kwargs)

        monkeypatch.setattr(openvino.Core, name, guarded)


def _forbid_in(monkeypatch: pytest.MonkeyPatch, module: str, names: tuple[str, ...], why: str = "(a server)") -> None:
    try:
        target = importlib.import_module(module)
    except ImportError:  # not installed: nothing of it can start
        return
    for name in names:
        owner_name, _, attribute = name.rpartition(".")
        owner = getattr(target, owner_name) if owner_name else target
        if hasattr(owner, attribute):
            monkeypatch.setattr(owner, attribute, _refusal(f"uses {module}.{name} {why}"))
