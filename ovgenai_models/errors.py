"""The one error model preparation reports to its user: what failed and what to do about it."""

from __future__ import annotations


class ExportError(RuntimeError):
    """A model could not be prepared; the message says why and what to do (the command line prints it)."""


class ExportToolsMissing(ExportError):
    """The conversion tools are not installed where this runs (`make run` keeps them in an environment of their own:
    the command line hands the command to OVGENAI_EXPORT_PYTHON)."""
