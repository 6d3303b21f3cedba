"""Benchmark servers: any command as a subprocess on a free loopback port, ready when its health URL says so.

Deliberately independent of tests/ (the benchmark must not import the test suite). The command is given as a list
in which "{port}" stands for the chosen port, so the same launcher starts this project's backend and vLLM.
The server's output goes to a log file, so that a failed start (or a failed run) can show its tail.
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

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service(module: str, args: list[str] | None = None, env: dict[str, str] | None = None,
            health_path: str = "/health", checkout: Path | None = None) -> Server:
    """One of this project's services (`python -m <module>`), on loopback; `checkout`: from another checkout of this
    repository (a git worktree at another commit, to compare before and after) instead of this one."""
    command = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", "{port}", *(args or [])]
    if checkout is not None:  # its packages before this checkout's (installed in the environment as editable)
        env = {**(env or {}), "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'dependency'}"}
    return Server(module, command, env=env, health_path=health_path, cwd=checkout or ROOT)


class Server:
    def __init__(
        self,
        name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        health_path: str = "/health",
        startup_timeout: float = 300,
        stop_timeout: float = 30,
        log_dir: Path | None = None,
        cwd: Path = ROOT,
    ):
        self.name = name
        self.cwd = cwd
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [part.replace("{port}", str(self.port)) for part in command]
        self.env = {**os.environ, **(env or {})}
        self.health_path = health_path
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        log_dir = log_dir or Path(tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{name}-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self.started_in: float | None = None

    def start(self) -> Server:
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            # A session of its own, so that stop() can also reach the workers a server spawns (vLLM's engine core).
            self.process = subprocess.Popen(
                self.command, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_healthy(started + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - started
        return self

    def _wait_healthy(self, deadline: float) -> None:
        # Polled with a deadline rather than a fixed sleep: start-up takes 5 s for one server and minutes for another.
        with httpx.Client(timeout=5) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {self.process.returncode} while starting; log {self.log_path}:\n"
                        f"{self.tail()}"
                    )
                try:
                    if client.get(self.url + self.health_path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        raise TimeoutError(
            f"{self.name} not healthy at {self.url}{self.health_path} after {self.startup_timeout:.0f}s; "
            f"log {self.log_path}:\n{self.tail()}"
        )

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self) -> int | None:
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Whatever the server left behind in its session (workers that outlived it) goes too.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return process.returncode

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
