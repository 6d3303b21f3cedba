"""Handing a command to the environment that has the conversion tools.

`make run` installs what serving needs and nothing else; torch, transformers, optimum-intel and NNCF live in an
environment of their own, installed the first time a model must be converted. Where they are missing, a command
that needs them runs again in that environment's Python (OVGENAI_EXPORT_PYTHON; the Makefile points it at
scripts/export_tools.sh, which installs them on first use). Preparation is idempotent, so the second run picks up
where the first stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .errors import ExportToolsMissing

EXPORT_PYTHON = "OVGENAI_EXPORT_PYTHON"
_IN_USE = f"{EXPORT_PYTHON}_IN_USE"  # set in the other environment: never hand a command on twice


def run_with_export_tools(argv: list[str], missing: ExportToolsMissing, env: dict[str, str] | None = None) -> int:
    """`python -m ovgenai_models <argv>` in the environment with the tools; its exit code. Raises `missing` again
    when there is no such environment."""
    delegate = os.environ.get(EXPORT_PYTHON)
    if not delegate or os.environ.get(_IN_USE):
        raise missing
    print("the conversion tools live in an environment of their own: converting there", flush=True)
    # Conversion progress is ours and NNCF's to print; transformers' and torch's tracing notes are not for users.
    quiet = {"TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}
    child_env = {**quiet, **os.environ, **(env or {}), _IN_USE: "1"}
    return subprocess.run([delegate, "-m", "ovgenai_models", *argv], env=child_env, stdout=sys.stdout,
                          stderr=sys.stderr).returncode
