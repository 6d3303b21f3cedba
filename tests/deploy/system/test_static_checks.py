"""Images, manifests and scripts pass the linters users' CI would run: hadolint, kubernetes-validate, shellcheck."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.servers import ROOT

# Starts processes, servers or real pipelines: the system tier (not make test-unit).

BIN = Path(sys.executable).parent
DOCKERFILE = ROOT / "Dockerfile"
MANIFESTS = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))
# scripts/, and the entry points OPEA's guide runs from dependency/.
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh")) + sorted((ROOT / "dependency").glob("*.sh"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_dockerfile_passes_hadolint():
    result = run(str(BIN / "hadolint"), "--config", str(ROOT / ".hadolint.yaml"), str(DOCKERFILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(":latest" not in line for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM"))


# Every image the Dockerfile builds.
TARGETS = ["backend", "backend-gpu", "llm", "embedding", "gateway", "models", "models-export"]


def stages() -> dict[str, str]:
    """Each build stage of the Dockerfile by name, with its instructions."""
    parts = re.split(r"^FROM ", DOCKERFILE.read_text(), flags=re.M)[1:]
    return {part.split("\n", 1)[0].split(" AS ")[-1].strip(): part for part in parts}


@pytest.mark.parametrize("target", TARGETS)
def test_every_image_is_a_stage_that_runs_unprivileged(target):
    stage = stages()[target]
    assert "\nUSER 1000" in stage and "ENTRYPOINT" in stage
    assert ("HEALTHCHECK" in stage) == (not target.startswith("models"))  # one-shot preparation: nothing to probe
    assert "COPY --from=source" in stage.split("USER")[0]  # source last: a code change rebuilds one layer
    assert stage.index("COPY --from=deps-") < stage.index("COPY --from=source")


def test_only_the_export_image_installs_torch():
    """The models image, which compose and the chart run by default, prepares IR, GGUF and the default models
    without torch; models-export adds the conversion tools for a checkpoint."""
    stage = stages()
    assert "COPY --from=deps-models /opt/venv" in stage["models"] and "deps-models AS deps-models-export" in stage[
        "deps-models-export"].split("\n")[0]
    assert "COPY --from=deps-models-export /opt/venv" in stage["models-export"]
    requirements = stage["requirements"]
    assert "python requirements.py backend embedding prepare > models.txt" in requirements
    for name in ("venv", "deps-openvino", "deps-models", "models"):
        assert not any("torch" in line for line in stage[name].splitlines() if not line.startswith("#")), name


OCI_LABELS = ("title", "description", "source", "licenses", "version", "revision")


@pytest.mark.parametrize("target", TARGETS)
def test_every_image_carries_the_oci_labels(target):
    """What registries and scanners show of an image; version and revision come from build arguments, declared last
    so that a new commit rebuilds only the labels."""
    stage = stages()[target]
    label = stage[stage.index("LABEL "):]
    for name in OCI_LABELS:
        assert f"org.opencontainers.image.{name}=" in label, (target, name)
    assert 'licenses="Apache-2.0"' in label
    assert stage.index("LABEL ") > stage.index("ENTRYPOINT")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    # The default version (a build without the scripts, e.g. compose's) is the project's.
    assert f"ARG VERSION={project['version']}\n" in DOCKERFILE.read_text()


def test_dependencies_come_from_the_committed_constraints():
    for name, stage in stages().items():
        if name.startswith("deps-"):
            assert stage.count("pip install") == stage.count("-c constraints.txt"), name


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_manifest_is_valid(manifest):
    result = run(str(BIN / "kubernetes-validate"), "--strict", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr


def test_backend_readiness_differs_from_liveness():
    import yaml

    documents = yaml.safe_load_all((ROOT / "deploy/kubernetes/backend.yaml").read_text())
    backend = next(doc for doc in documents if doc and doc["kind"] == "StatefulSet")
    container = backend["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/live"


def test_shell_scripts_pass_shellcheck():
    result = run(str(BIN / "shellcheck"), "-x", "-P", "SCRIPTDIR/..", *map(str, SCRIPTS))
    assert any(script.parent.name == "dependency" for script in SCRIPTS)
    assert result.returncode == 0, result.stdout
    for script in SCRIPTS:
        if script.name != "lib.sh":
            assert "set -euo pipefail" in script.read_text(), script.name


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name.startswith(("launch_", "build_"))],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_help(script):
    result = run("bash", str(script), "-h")
    assert result.returncode == 0 and "Usage" in result.stdout
