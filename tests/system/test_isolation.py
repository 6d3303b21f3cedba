"""The unit tier's guard (tests/support/isolation.py) lets a system test (one under a system/ folder) start what a unit
test may not."""

from __future__ import annotations

import subprocess


def test_a_system_test_may():
    assert subprocess.run(["true"], check=False).returncode == 0
