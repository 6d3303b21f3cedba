"""hub.py without a Hub: a full disk during a download said as what it needed and where (the real client on a
loopback Hub: system/test_hub.py), and what a published encoder IR's download takes (test_pull.py)."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest

from ovgenai_models import hub
from ovgenai_models.errors import ExportError


def test_a_full_disk_during_a_download_names_the_size_the_cache_and_what_to_do(monkeypatch, tmp_path):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**10, 10**10, 3 * 10**6))
    monkeypatch.setattr(hub, "cache_folder", lambda: tmp_path / "hf" / "hub")
    with pytest.raises(ExportError) as error, hub.translated("org/model", needs=lambda: 7_400 * 10**6):
        raise OSError(errno.ENOSPC, "No space left on device")
    message = str(error.value)
    assert "ran out of space while downloading 'org/model' into the Hub's download cache" in message
    assert f"It needs about 7,400 MB on the disk of {tmp_path / 'hf' / 'hub'}, and 3 MB are free there" in message
    assert "HF_HOME" in message


def test_the_size_is_a_courtesy_and_other_os_errors_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "cache_folder", lambda: tmp_path)

    def unreachable():
        raise ConnectionError("no network")

    with pytest.raises(ExportError, match="ran out of space while downloading 'org/model'"):
        with hub.translated("org/model", needs=unreachable):
            raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(PermissionError), hub.translated("org/model"):
        raise PermissionError(errno.EACCES, "denied")
