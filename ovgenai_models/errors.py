"""The one error model preparation reports to its user: what failed and what to do about it."""

from __future__ import annotations

import os


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


def export_tools_hint() -> str:
    """How to get the conversion tools where this runs: natively, the environment of their own; in the models image,
    which has none (OVGENAI_EXPORT_IMAGE names the image that has them), that image."""
    image = os.environ.get("OVGENAI_EXPORT_IMAGE")
    if not image:
        return f"{EXPORT_TOOLS_HINT}. (In containers: the project's models-export image.)"
    return (f"This image has none: prepare the model with the {image} image instead (compose: add "
            "`-f compose.export.yaml`; the Helm chart: `--set models.prepare.exportTools=true`; the launch scripts "
            f"use it once it is built: `scripts/build_docker_microservice.sh {image}`).")
