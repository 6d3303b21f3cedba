"""Real servers for tests: a subprocess on a free loopback port, ready when its health endpoint says so.

Modelled on vLLM's RemoteOpenAIServer: the same `python -m <package>` command users run, polled with a deadline
(never a fixed sleep), and stopped with SIGTERM (SIGKILL only if it does not exit).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
# The backends a test starts get a 1 GB KV cache unless the test says otherwise: sized automatically, the default
# model's cache takes a quarter of the machine's free memory (several GB), which costs every start a second and
# several servers run at once. The session's shared backend keeps the automatic size (tests/conftest.py).
TEST_KV_CACHE = {"VLLM_OPENVINO_KVCACHE_SPACE": "1"}
# And no autotune: a test's outcome must not depend on what a sweep measured on the machine (the step budget it
# picked, the wait limit its prompt rate sets under the suite's load). tests/ovgenai_server/system/test_autotune.py
# starts servers with it.
TEST_BACKEND_ENV = {**TEST_KV_CACHE, "AUTOTUNE": "false"}
BACKEND_MODULES = ("ovgenai_server", "ovgenai_server.torchserve")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float, interval: float = 0.05, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {message}")


class RemoteServer:
    def __init__(
        self,
        module: str,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        health_path: str = "/health",
        startup_timeout: float = 120,
        port: int | None = None,
    ):
        self.module = module
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.health_path = health_path
        self.log = tempfile.NamedTemporaryFile(prefix=f"{module}-", suffix=".log", delete=False)
        defaults = TEST_BACKEND_ENV if module in BACKEND_MODULES else {}
        full_env = {**os.environ, "PORT": str(self.port), "HOST": "127.0.0.1", **defaults, **(env or {})}
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *(args or [])],
            cwd=ROOT,
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self.wait_healthy(startup_timeout)
        except Exception:
            self.stop()
            raise

    def healthy(self) -> bool:
        try:
            return httpx.get(self.url + self.health_path, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_healthy(self, timeout: float = 120) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.logs()[-3000:]}")
            return self.healthy()

        wait_until(ready, timeout, message=f"{self.url}{self.health_path}")

    def logs(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def stop(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def child_pids(pid: int) -> list[int]:
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return []
    return [int(p) for p in out.split()]


def llm_microservice(backend_url: str, model: str) -> RemoteServer:
    """The LLM microservice in front of a backend, as compose wires it."""
    env = {"LLM_ENDPOINT": backend_url, "LLM_MODEL": model}
    return RemoteServer("microservices.llm", env=env, health_path="/v1/health_check")
