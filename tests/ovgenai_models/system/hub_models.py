"""Running `python -m ovgenai_models` as users do, with the export tools or without them (blocked on import), for
the tests that pull and prepare from the loopback Hub (conftest.py makes its models)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.servers import ROOT

# What serving, OpenVINO IR and GGUF models must do without: importing any of these fails in the blocked runs.
EXPORT_TOOLS = ("torch", "optimum", "nncf", "transformers")


def blocking(names: tuple[str, ...]) -> str:
    """`python -m ovgenai_models` with `names` failing on import."""
    return (f"import sys\nfor name in {names!r}:\n    sys.modules[name] = None\n"
            "from ovgenai_models.__main__ import main\nsys.exit(main(sys.argv[1:]))")


def models_cli(*args: str, env: dict[str, str], without_export_tools: bool = False,
               blocked: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`blocked`: what fails on import (`without_export_tools`: EXPORT_TOOLS); blocked runs have no environment with
    the tools to hand a conversion to (`make test` names one)."""
    blocked = EXPORT_TOOLS if without_export_tools else blocked
    command = ["-c", blocking(blocked)] if blocked else ["-m", "ovgenai_models"]
    handoff = {"OVGENAI_EXPORT_PYTHON": ""} if blocked else {}
    return subprocess.run([sys.executable, *command, *args], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, **env, **handoff})


def prepare(repository, env: dict[str, str], *args: str, without_export_tools: bool = False):
    return models_cli("prepare", "--model_repository_path", str(repository), *args, env=env,
                      without_export_tools=without_export_tools)


def last_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]
