"""Clients' own tools and test suites, run against the stack's real services by system tests.

Each client lives in a venv of its own under .cache/client-venvs (`make client-venvs`, which `make test` runs), never
beside the project's pins: lm-evaluation-harness (its `datasets` pins another fsspec than the project),
LangChain's standard integration suites (langchain-tests, with the langchain-openai the project pins), the client
libraries of tests/clients/sdks (LiteLLM, OpenAI's Agents SDK, LlamaIndex), and vLLM's benchmark client
(tests/clients/vllm_bench, in the vllm venv: vLLM's CPU build on torch's). A system test
starts the services with the suite's fixtures, then runs the client's program, or that venv's pytest on a module of
tests/clients/, with the services' addresses in the environment; the sub-run's summary is the failure message."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.servers import ROOT

VENVS = ROOT / ".cache/client-venvs"
SUITES = ROOT / "tests/clients"
# What the project's pytest (and pytest-xdist) put in the environment must not steer the client's own run.
PARENT_ONLY = ("PYTEST_", "PYTHONPATH", "VIRTUAL_ENV")
# The most of a failed sub-run's output a failure message carries: its summary section, else its end.
REPORT_CHARS = 8000
# pytest's summary line: "4 passed, 14 warnings in 14.78s", in -q runs without the "=" frame.
SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed|error|skipped|xfailed|xpassed|deselected)\b.* in [\d.]+s")


def program(venv: str, name: str = "python") -> Path:
    """A program of the client venv `venv`; the test fails, saying how to build the venv, when it is missing."""
    path = VENVS / venv / "bin" / name
    if not path.is_file():
        pytest.fail(f"no {path.relative_to(ROOT)}: run `make client-venvs` (make test does it)")
    return path


def client_env(**extra: str) -> dict[str, str]:
    """This process's environment without what belongs to the project's own run, offline for the Hugging Face Hub,
    loopback never sent to a proxy, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(PARENT_ONLY)}
    loopback = "127.0.0.1,localhost,::1"
    env["no_proxy"] = env["NO_PROXY"] = ",".join(p for p in (env.get("no_proxy"), loopback) if p)
    return {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **extra}


def run(command: list[str | Path], cwd: Path, env: dict[str, str], timeout: float) -> str:
    """Run a client's program; its output, or a failure carrying the end of it."""
    result = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{Path(command[0]).name} exited with {result.returncode}:\n{report(output)}"
    return output


def run_pytest(venv: str, module: str, timeout: float = 600, **env: str) -> str:
    """`venv`'s pytest on tests/clients/<module> with its folder's pytest.ini (the project's conftest and settings
    stay out), `env` added; every test must pass, or fail as marked (xfail, each with its reason). Returns the
    sub-run's summary line."""
    path = SUITES / module
    command = [program(venv), "-m", "pytest", path.name, "-c", "pytest.ini", "-p", "no:cacheprovider", "-q", "-rfEX"]
    output = run(command, path.parent, client_env(**env), timeout)
    # pytest's last line, not the output's: native extensions may write at interpreter exit (triton's nanobind).
    summaries = [line for line in output.splitlines() if SUMMARY.match(line)]
    assert summaries and " passed" in summaries[-1], report(output)  # it did test something
    return summaries[-1]


def report(output: str) -> str:
    """What failed and why: pytest's error lines (`E ...`) and its short summary, or the output's end."""
    marker = output.rfind("short test summary info")
    if marker < 0:
        return output[-REPORT_CHARS:]
    errors = "\n".join(line for line in output[:marker].splitlines() if line.startswith("E "))
    return (errors[-REPORT_CHARS // 2:] + "\n" + output[marker:])[-REPORT_CHARS:]
