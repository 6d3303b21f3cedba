"""The container engine the container tests drive: whatever Docker-API engine is reachable.

Order: the engine the environment names (DOCKER_HOST) or Docker's default socket; else, on machines that carry
it, the workplace's Podman set-up script (CONTAINER_ENGINE_SETUP, or ../shared/containers/engine.sh beside the
clone), which starts Podman with a Docker-API socket. No engine at all: the tests are skipped and say so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import ROOT

SETUP_SCRIPT = Path(os.environ.get("CONTAINER_ENGINE_SETUP", ROOT.parent / "shared/containers/engine.sh"))


@dataclass(frozen=True)
class Engine:
    env: dict[str, str]  # the environment every docker / compose call runs with
    compose: list[str]  # `docker compose` (v2) or `docker-compose` (v1)
    podman: bool  # Podman behind the Docker API: it runs healthchecks only when asked (no systemd timers)

    def run_healthchecks(self, project: str) -> None:
        """What Docker's healthcheck timers do, once, for a Podman engine: run each running container's
        HEALTHCHECK so that its health status (and compose's `service_healthy` ordering) moves on."""
        if not self.podman:
            return
        label = f"label=com.docker.compose.project={project}"
        for container in self.docker("ps", "-q", "--filter", label, check=False).stdout.split():
            subprocess.run(["podman", "healthcheck", "run", container], env=self.env, capture_output=True,
                           timeout=60)

    def run(self, *args: str, check: bool = True, timeout: float = 900, cwd: Path = ROOT,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run(args, cwd=cwd, env={**self.env, **(env or {})}, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                                 f"{result.stderr[-3000:]}")
        return result

    def docker(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run("docker", *args, **kwargs)


def _reachable(env: dict[str, str]) -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], env=env, capture_output=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _compose_command(env: dict[str, str]) -> list[str]:
    if subprocess.run(["docker", "compose", "version"], env=env, capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return []


def find_engine() -> Engine | str:
    """The engine, or why there is none."""
    env = dict(os.environ)
    if not _reachable(env) and SETUP_SCRIPT.is_file() and os.geteuid() == 0:
        setup = subprocess.run(["bash", str(SETUP_SCRIPT), "up"], capture_output=True, text=True, timeout=900)
        exported = re.search(r"export DOCKER_HOST=(\S+)", setup.stdout)
        if setup.returncode != 0 or not exported:
            return f"the engine set-up script failed: {setup.stderr[-500:]}"
        env = {**env, "DOCKER_HOST": exported.group(1), "BUILDAH_FORMAT": "docker"}
    if not _reachable(env):
        return "no container engine"
    compose = _compose_command(env)
    if not compose:
        return "no compose command (docker compose or docker-compose)"
    version = subprocess.run(["docker", "version", "--format", "{{json .Server.Components}}"], env=env,
                             capture_output=True, text=True).stdout
    return Engine(env=env, compose=compose, podman="Podman" in version and shutil.which("podman") is not None)
