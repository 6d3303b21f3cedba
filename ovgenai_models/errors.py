"""The one error model preparation reports to its user: what failed and what to do about it."""

from __future__ import annotations


class ExportError(RuntimeError):
    """A model could not be prepared; the message says why and what to do (the command line prints it)."""


class ExportToolsMissing(ExportError):
    """The conversion tools are not installed where this runs (`make run` keeps them in an environment of their own:
    the command line hands the command to OVGENAI_EXPORT_PYTHON)."""


# How to get the conversion tools, for every message that needs them: never `pip install -e '.[export]'`, which
# resolves PyPI's CUDA build of torch (several GB) into the serving environment.
EXPORT_TOOLS_HINT = (
    "Install them once, into an environment of their own, from the project's folder: `make export-tools` (or "
    "`scripts/export_tools.sh --install`): torch's CPU build from PyTorch's CPU index and the rest from PyPI, about "
    "1.8 GB in .cache/export-venv. Every way of preparing a model then converts there by itself"
)
