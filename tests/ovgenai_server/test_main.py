"""`python -m ovgenai_server` (__main__.py): its command line becomes the settings the server is served with, and
what cannot start exits 2 with the reason on stderr."""

from __future__ import annotations

import logging

import pytest

from ovgenai_server import __main__ as entry
from ovgenai_server import app as backend_app


@pytest.fixture(autouse=True)
def _root_logger_kept():
    """main() sets up the root logger for the process: put back what the test runner had."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_command_line_is_served_with_its_logging_set_up(monkeypatch):
    served, logging_set = [], []
    monkeypatch.setattr(backend_app, "serve", served.append)
    monkeypatch.setattr(entry, "setup_logging", lambda *args: logging_set.append(args))
    entry.main(["--rest_port", "9001", "--model_path", "/models/llm", "--log_level", "DEBUG", "--log_format", "json"])
    [settings] = served
    assert (settings.port, settings.model) == (9001, "/models/llm")
    assert logging_set == [("DEBUG", "json")]


def test_a_flag_that_cannot_be_honoured_exits_2_before_anything_starts(monkeypatch, capsys):
    monkeypatch.setattr(backend_app, "serve", lambda _settings: pytest.fail("served"))
    with pytest.raises(SystemExit) as exited:
        entry.main(["--task", "embeddings"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_an_unreadable_repository_stops_the_server_with_the_path(monkeypatch, capsys):
    """As a container's non-root user meets a repository prepared with private modes: exit 2, naming the file.
    (Faked: the suite may run as root, whom no file mode stops.)"""
    from ovgenai_server import __main__ as server
    from ovgenai_server.models import specs as model_specs

    def unreadable(_settings):
        raise PermissionError(13, "Permission denied", "/models/config.json")

    monkeypatch.setattr(model_specs, "load_model_specs", unreadable)
    monkeypatch.setattr(backend_app, "bound", lambda _settings: None)  # the port: not taken in a unit test
    with pytest.raises(SystemExit) as exit_info:
        server.main(["--model", "/models"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "cannot read the model repository (/models)" in error and "'/models/config.json'" in error, error


def test_pull_without_a_source_is_refused(capsys):
    from ovgenai_server.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--pull", "--model", "."])
    assert exited.value.code == 2 and "--source_model" in capsys.readouterr().err
