"""A headless Chromium for the browser tests, driven by Playwright.

`make test-tools` unpacks one from the npm registry (@sparticuz/chromium: the browser and the few libraries it
needs beyond libc) into .cache/tools/chromium, so the tests need no root and no Debian package; Debian's chromium is
used where that is missing, and CHROMIUM names any other."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import ROOT

UNPACKED = ROOT / ".cache/tools/chromium"
# Chromium's own background connections are refused by this machine's closed network: switch them off.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def executable() -> tuple[str, dict[str, str]]:
    """The Chromium to start, and what its environment needs (the unpacked one's libraries and fonts)."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"], {}
    if (UNPACKED / "chromium").is_file():
        library_path = ":".join(p for p in (str(UNPACKED / "lib"), os.environ.get("LD_LIBRARY_PATH")) if p)
        return str(UNPACKED / "chromium"), {"LD_LIBRARY_PATH": library_path,
                                            "FONTCONFIG_FILE": str(UNPACKED / "fonts.conf")}
    return shutil.which("chromium") or "/usr/bin/chromium", {}


@contextlib.contextmanager
def chromium() -> Iterator:
    from playwright.sync_api import sync_playwright

    path, env = executable()
    if not Path(path).is_file():
        import pytest

        pytest.fail(f"no Chromium at {path}: run `make test-tools` (it unpacks one into {UNPACKED})")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, headless=True, args=ARGS,
                                             env={**os.environ, **env})
        try:
            yield browser
        finally:
            browser.close()
