"""Every `python -m` entry point's `--help`, run as users run it: it exits 0 and its usage line names the command
(it said `usage: __main__.py`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.servers import ROOT

COMMANDS = ["ovgenai_services.llm", "ovgenai_services.embedding", "ovgenai_services.gateway", "ovgenai_services.stack",
            "ovgenai_models", "ovgenai_server.torchserve", "ovgenai_server"]


@pytest.mark.parametrize("module", COMMANDS)
def test_help_names_the_command(module):
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"usage: python -m {module} "), result.stdout[:200]
    assert "__main__.py" not in result.stdout
