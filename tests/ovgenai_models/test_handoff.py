"""Handing a command to the environment with the conversion tools (handoff.py), with the process it would start
recorded instead: run only where OVGENAI_EXPORT_PYTHON names one and never a second time from inside it, marked so,
quiet, with the models `prepare` was asked for; a failure there is an ExportError here."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from ovgenai_models import handoff, prepare
from ovgenai_models.errors import ExportError, ExportToolsMissing

MISSING = ExportToolsMissing("install the export tools")


@pytest.fixture
def started(monkeypatch):
    """The processes handoff would start: (command, env); each exits with `started.code`."""
    runs = SimpleNamespace(calls=[], code=0)

    def run(command, env, stdout, stderr):
        assert (stdout, stderr) == (sys.stdout, sys.stderr)  # its progress is the user's to see
        runs.calls.append((command, env))
        return SimpleNamespace(returncode=runs.code)

    monkeypatch.setattr(handoff.subprocess, "run", run)
    monkeypatch.delenv("OVGENAI_EXPORT_PYTHON_IN_USE", raising=False)
    return runs


def test_without_an_environment_with_the_tools_the_missing_tools_are_the_error(monkeypatch, started, tmp_path):
    monkeypatch.setattr(handoff, "EXPORT_VENV", tmp_path / "export-venv")  # not installed
    monkeypatch.delenv("OVGENAI_EXPORT_PYTHON", raising=False)
    with pytest.raises(ExportToolsMissing, match="install the export tools"):
        handoff.run_with_export_tools(["embeddings"], MISSING)
    monkeypatch.setenv("OVGENAI_EXPORT_PYTHON", "")  # compose's unset variable
    with pytest.raises(ExportToolsMissing):
        handoff.run_with_export_tools(["embeddings"], MISSING)
    assert started.calls == []


def test_the_command_runs_again_in_that_python_marked_and_quiet(monkeypatch, started, capsys):
    monkeypatch.setenv("OVGENAI_EXPORT_PYTHON", "/opt/export/bin/python")
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # the user's own choice wins over the quiet default
    started.code = 3
    assert handoff.run_with_export_tools(["rerank", "--source_model", "m"], MISSING, {"LLM_MODEL_ID": "x"}) == 3
    [(command, env)] = started.calls
    assert command == ["/opt/export/bin/python", "-m", "ovgenai_models", "rerank", "--source_model", "m"]
    assert env["OVGENAI_EXPORT_PYTHON_IN_USE"] == "1" and env["LLM_MODEL_ID"] == "x"
    assert env["PYTHONWARNINGS"] == "ignore" and env["TRANSFORMERS_VERBOSITY"] == "info"
    assert "converting there" in capsys.readouterr().out


def test_never_handed_on_twice(monkeypatch, started):
    monkeypatch.setenv("OVGENAI_EXPORT_PYTHON", "/opt/export/bin/python")
    monkeypatch.setenv("OVGENAI_EXPORT_PYTHON_IN_USE", "1")  # this is that environment, and it lacks them too
    with pytest.raises(ExportToolsMissing):
        handoff.run_with_export_tools(["embeddings"], MISSING)
    assert started.calls == []


# llm, its revision, gguf_filename, embedding, its revision, rerank, its revision
ARGS = ("LLM", None, "f.gguf", "EMB", "v2", None, None)


def test_prepared_here_when_the_tools_are_not_needed(monkeypatch, started, tmp_path):
    prepared = []
    monkeypatch.setattr(prepare, "prepare_models", lambda *args: prepared.append(args))
    handoff.prepare_models_with_tools(tmp_path, *ARGS, "DRAFT", True)
    assert prepared == [(tmp_path, *ARGS, "DRAFT", True)] and started.calls == []


def test_prepared_there_with_the_models_named_when_they_are(monkeypatch, started, tmp_path):
    def missing(*_args):
        raise MISSING

    monkeypatch.setattr(prepare, "prepare_models", missing)
    monkeypatch.setenv("OVGENAI_EXPORT_PYTHON", "/opt/export/bin/python")
    unset = ("LLM_MODEL_REVISION", "RERANK_MODEL_ID", "RERANK_MODEL_REVISION")
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    handoff.prepare_models_with_tools(tmp_path, *ARGS, "DRAFT")
    [(command, env)] = started.calls
    assert command[3:] == ["prepare", "--model_repository_path", str(tmp_path)]
    assert {name: env[name] for name in ("LLM_MODEL_ID", "GGUF_FILENAME", "EMBEDDING_MODEL_ID",
                                         "EMBEDDING_MODEL_REVISION", "LLM_DRAFT_MODEL_ID")} == {
        "LLM_MODEL_ID": "LLM", "GGUF_FILENAME": "f.gguf", "EMBEDDING_MODEL_ID": "EMB", "EMBEDDING_MODEL_REVISION": "v2",
        "LLM_DRAFT_MODEL_ID": "DRAFT"}
    assert not set(unset) & set(env)  # what was not named is not passed on (as an empty name)
    handoff.prepare_models_with_tools(tmp_path, *ARGS, "DRAFT", only_llm=True)
    assert started.calls[-1][0][3:] == ["prepare", "--model_repository_path", str(tmp_path), "--serve_only"]
    started.code = 1
    with pytest.raises(ExportError, match="preparing the models with the conversion tools failed"):
        handoff.prepare_models_with_tools(tmp_path, *ARGS)


def test_outside_make_the_checkout_s_installed_export_environment_is_used(monkeypatch, started, tmp_path):
    """`export_model.sh`, the launch scripts and `python -m ovgenai_server serve` run without the Makefile's
    OVGENAI_EXPORT_PYTHON: once `make export-tools` has installed the tools, they convert there too."""
    venv = tmp_path / "export-venv"
    monkeypatch.setattr(handoff, "EXPORT_VENV", venv)
    monkeypatch.delenv("OVGENAI_EXPORT_PYTHON", raising=False)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    with pytest.raises(ExportToolsMissing):  # half-installed: no .installed mark yet
        handoff.run_with_export_tools(["embeddings"], MISSING)
    (venv / ".installed").write_text("")
    assert handoff.run_with_export_tools(["embeddings"], MISSING) == 0
    [(command, _env)] = started.calls
    assert command[:3] == [str(venv / "bin" / "python"), "-m", "ovgenai_models"]
    monkeypatch.setenv("OVGENAI_EXPORT_PYTHON", "")  # set empty: none, even with one installed
    with pytest.raises(ExportToolsMissing):
        handoff.run_with_export_tools(["embeddings"], MISSING)
