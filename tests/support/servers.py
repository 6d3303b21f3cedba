"""Real servers for tests: a subprocess on a free loopback port, ready when its health endpoint says so.

Modelled on vLLM's RemoteOpenAIServer: the same `python -m <package>` command users run, polled with a deadline
(never a fixed sleep), and stopped with SIGTERM (SIGKILL only if it does not exit).
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from ovgenai_common.startup import LIVE_PATHS

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
# The gateway's answers greedy in tests (its own default is the model's sampling, temperature 0.2 for the default
# model): a test of what an answer says must not depend on a draw.
TEST_GATEWAY_ENV = {"TEMPERATURE": "0"}
# The servers' logs, in a folder of this test process's own that goes when it ends (a failure message carries what
# it needs of a log).
LOGS = tempfile.TemporaryDirectory(prefix="test-server-logs-")


PORTS_PER_WORKER = 1000


def worker_ports(ephemeral_low: int, worker: str | None) -> range:
    """The ports a test process picks from: a block of its own per xdist worker (`worker`: "gw0", "gw1", … or None),
    just below the kernel's ephemeral range. A port picked inside that range, free when picked, can be taken by any
    outgoing connection's source port before the server binds it (the server then stops on "address already in
    use", as a backend did while the other worker's clients connected); below it only a deliberate bind takes it."""
    index = int(worker.removeprefix("gw") or 0) if worker else 0
    high = ephemeral_low - index * PORTS_PER_WORKER
    return range(max(high - PORTS_PER_WORKER, 1024), max(high, 1024))


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _in_turn(ports: range) -> Iterator[int]:
    """`ports` round and round, from a random start (a new run does not begin on the last run's ports)."""
    start = random.randrange(len(ports)) if ports else 0
    return itertools.cycle([*ports[start:], *ports[:start]])


_PORTS = worker_ports(_ephemeral_low(), os.environ.get("PYTEST_XDIST_WORKER"))
_next_port = _in_turn(_PORTS)


def free_port() -> int:
    """A loopback port that is free now and that nothing but a deliberate bind will take (worker_ports), in turn
    through this worker's block from a random start, so that a port comes back only after the whole block."""
    for _ in range(len(_PORTS)):
        port = next(_next_port)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use, or its connections are in TIME_WAIT
                continue
        return port
    with socket.socket() as sock:  # no block (an unusual ephemeral range), or all of it in use
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
        self.log = tempfile.NamedTemporaryFile(prefix=f"{module}-", suffix=".log", dir=LOGS.name, delete=False)
        defaults = TEST_BACKEND_ENV if module in BACKEND_MODULES else TEST_GATEWAY_ENV if module == \
            "ovgenai_services.gateway" else {}
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

    def openai_client(self, prefix: str = "/v1"):
        """The official `openai` client of this server's OpenAI routes (under `prefix`), without retries."""
        import openai

        return openai.OpenAI(base_url=self.url + prefix, api_key="unused", max_retries=0)

    def healthy(self) -> bool:
        """The health path answers 200; for a liveness path, which is 200 while the service still loads, the app
        must have started too (its loading front answers 503 on every other route until then)."""
        try:
            if httpx.get(self.url + self.health_path, timeout=2).status_code != 200:
                return False
            if self.health_path not in LIVE_PATHS:
                return True
            return httpx.get(self.url + "/openapi.json", timeout=2).status_code != 503
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
    return RemoteServer("ovgenai_services.llm", env=env, health_path="/v1/health_check")
