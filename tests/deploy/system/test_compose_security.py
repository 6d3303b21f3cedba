"""Grafana's entrypoint in the compose stack, run: it starts Grafana only with a password of its own."""

from __future__ import annotations

import subprocess

import pytest

from tests.deploy.test_compose_security import rendered


@pytest.mark.parametrize(("password", "starts"), [("", False), ("admin", False), ("s3cret", True)])
def test_grafanas_entrypoint_starts_it_only_with_a_password_of_its_own(password, starts):
    script = rendered()["grafana"]["entrypoint"][2].replace("$$", "$").replace("exec /run.sh", "echo started")
    run = subprocess.run(["/bin/sh", "-c", script], env={"GF_SECURITY_ADMIN_PASSWORD": password},
                         capture_output=True, text=True, timeout=10)
    assert (run.returncode == 0 and run.stdout == "started\n") is starts, run
    if not starts:
        assert "GRAFANA_ADMIN_PASSWORD" in run.stderr
