"""Handing a command to the environment that has the conversion tools.

`make run` installs what serving needs and nothing else; torch, optimum-intel and NNCF live in an environment of
their own, installed the first time a model must be converted. Where they are missing, a command that needs them
runs again in that environment's Python (export_python(): OVGENAI_EXPORT_PYTHON, which the Makefile points at
scripts/export_tools.sh, or the checkout's .cache/export-venv once installed). Preparation is idempotent, so the
second run picks up where the first stopped. With no such environment the error says how to install it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .errors import ExportError, ExportToolsMissing

# Set in the other environment (PrepareSettings reads it): a command is never handed on twice.
_IN_USE = "OVGENAI_EXPORT_PYTHON_IN_USE"
# Where `make export-tools` (scripts/export_tools.sh --install) puts the tools, in a checkout of the project.
EXPORT_VENV = Path(__file__).resolve().parents[1] / ".cache" / "export-venv"


def export_python() -> str | None:
    """The Python to hand a conversion to: OVGENAI_EXPORT_PYTHON where it is set (the Makefile sets it to
    scripts/export_tools.sh, which installs the tools on first use; set empty, none), else the checkout's own
    export environment once it is installed, so that scripts and `python -m` entry points started outside `make`
    convert there too."""
    if "OVGENAI_EXPORT_PYTHON" in os.environ:
        return os.environ["OVGENAI_EXPORT_PYTHON"].strip() or None
    if (EXPORT_VENV / ".installed").is_file() and (EXPORT_VENV / "bin" / "python").is_file():
        return str(EXPORT_VENV / "bin" / "python")
    return None


def run_with_export_tools(argv: list[str], missing: ExportToolsMissing, env: dict[str, str] | None = None) -> int:
    """`python -m ovgenai_models <argv>` in the environment with the tools; its exit code. Raises `missing` again
    when there is no such environment."""
    from .prepare import PrepareSettings

    delegate = export_python()
    if not delegate or PrepareSettings().ovgenai_export_python_in_use:
        raise missing
    print("the conversion tools live in an environment of their own: converting there", flush=True)
    # Conversion progress is ours and NNCF's to print; transformers' and torch's tracing notes are not for users.
    quiet = {"TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}
    child_env = {**quiet, **os.environ, **(env or {}), _IN_USE: "1"}
    return subprocess.run([delegate, "-m", "ovgenai_models", *argv], env=child_env, stdout=sys.stdout,
                          stderr=sys.stderr).returncode


def prepare_models_with_tools(repository: Path, llm: str | None, llm_revision: str | None, gguf_filename: str | None,
                              embedding: str | None, embedding_revision: str | None, rerank: str | None,
                              rerank_revision: str | None, draft: str | None = None, only_llm: bool = False) -> None:
    """`prepare_models` here, or, when a model needs the conversion tools and they live elsewhere, the same
    preparation there (the models named by the environment variables `prepare` reads). Raises ExportError when it
    fails either way."""
    from .prepare import prepare_models

    try:
        prepare_models(repository, llm, llm_revision, gguf_filename, embedding, embedding_revision, rerank,
                       rerank_revision, draft, only_llm)
    except ExportToolsMissing as missing:
        named = {"LLM_MODEL_ID": llm, "LLM_MODEL_REVISION": llm_revision, "GGUF_FILENAME": gguf_filename,
                 "EMBEDDING_MODEL_ID": embedding, "EMBEDDING_MODEL_REVISION": embedding_revision,
                 "RERANK_MODEL_ID": rerank, "RERANK_MODEL_REVISION": rerank_revision, "LLM_DRAFT_MODEL_ID": draft}
        env = {name: value for name, value in named.items() if value is not None}
        command = ["prepare", "--model_repository_path", str(repository), *(["--serve_only"] if only_llm else [])]
        if run_with_export_tools(command, missing, env):
            raise ExportError("preparing the models with the conversion tools failed (see above)") from missing

