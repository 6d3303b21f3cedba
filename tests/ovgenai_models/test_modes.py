"""Prepared models are readable by any user (a container's non-root user reads the mounted repository), although
the staged writes behind them start private."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import pytest

from ovgenai_models.export import staged
from ovgenai_models.repository import atomic_write


@pytest.fixture(autouse=True)
def usual_umask():
    import os

    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_are_readable_by_all(tmp_path):
    atomic_write(tmp_path / "config.json", "{}")
    assert mode(tmp_path / "config.json") == 0o644


def test_staged_exports_are_readable_by_all(tmp_path):
    with staged(tmp_path / "org" / "model", overwrite=False) as folder:
        assert mode(folder) == 0o700  # private while it is written
        (folder / "sub").mkdir(mode=0o700)
        fd, private = tempfile.mkstemp(dir=folder / "sub")
        Path(private).write_text("weights")
    target = tmp_path / "org" / "model"
    assert mode(target) == 0o755 and mode(target / "sub") == 0o755
    assert mode(next((target / "sub").iterdir())) == 0o644
