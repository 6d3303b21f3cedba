"""The one error model preparation reports to its user: what failed and what to do about it."""

from __future__ import annotations


class ExportError(RuntimeError):
    """A model could not be prepared; the message says why and what to do (the command line prints it)."""
