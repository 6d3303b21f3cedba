"""Images, manifests and scripts pass the linters users' CI would run: hadolint, kubernetes-validate, shellcheck."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT

BIN = Path(sys.executable).parent
DOCKERFILES = sorted([ROOT / "dependency/Dockerfile", ROOT / "dependency/Dockerfile.gpu",
                      *ROOT.glob("microservices/*/Dockerfile")])
MANIFESTS = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_passes_hadolint(dockerfile):
    result = run(str(BIN / "hadolint"), "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile))
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text()
    assert "HEALTHCHECK" in text and "\nUSER " in text and " AS build" in text
    assert all(":latest" not in line for line in text.splitlines() if line.startswith("FROM"))


def test_every_service_has_an_image():
    assert len(DOCKERFILES) == 5


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_manifest_is_valid(manifest):
    result = run(str(BIN / "kubernetes-validate"), "--strict", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr


def test_backend_readiness_differs_from_liveness():
    import yaml

    deployment = next(yaml.safe_load_all((ROOT / "deploy/kubernetes/backend.yaml").read_text()))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/live"


def test_shell_scripts_pass_shellcheck():
    result = run(str(BIN / "shellcheck"), "-x", "-P", "SCRIPTDIR/..", *map(str, SCRIPTS))
    assert result.returncode == 0, result.stdout
    for script in SCRIPTS:
        if script.name != "lib.sh":
            assert "set -euo pipefail" in script.read_text(), script.name


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name.startswith(("launch_", "build_"))],
                         ids=lambda p: p.name)
def test_script_help(script):
    result = run("bash", str(script), "-h")
    assert result.returncode == 0 and "Usage" in result.stdout
