"""Starting, watching and stopping the stack's processes.

Each service runs in its own session (so a terminal's Ctrl-C reaches only the launcher, which then stops the
services in reverse order); its output is streamed with a `name |` prefix; a service that exits on its own is
reported with its last log lines, and the whole stack is stopped with a non-zero exit rather than left
half-alive.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time

import httpx

from .services import Service

COLORS = ("\033[36m", "\033[35m", "\033[33m", "\033[32m")
RESET = "\033[0m"


class ServiceDied(RuntimeError):
    def __init__(self, service: Service, code: int | None, tail: list[str]):
        super().__init__(f"{service.name} exited with code {code}")
        self.service = service
        self.code = code
        self.tail = tail


class Supervisor:
    def __init__(self, services: list[Service], color: bool | None = None):
        self.services = services
        self.processes: dict[str, subprocess.Popen] = {}
        self.tails: dict[str, collections.deque[str]] = {}
        self.color = sys.stdout.isatty() if color is None else color
        self._write_lock = threading.Lock()
        self.stopping = False

    def say(self, text: str) -> None:
        with self._write_lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def _pump(self, service: Service, index: int, stream) -> None:
        prefix = f"{service.name:<9}| "
        if self.color:
            prefix = COLORS[index % len(COLORS)] + prefix + RESET
        tail = self.tails[service.name]
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            tail.append(line)
            self.say(prefix + line)

    def start(self, service: Service, index: int) -> None:
        # Children inherit the launcher's environment (PATH, proxies, user overrides) plus their own settings.
        env = {**os.environ, **service.env, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            service.command(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.processes[service.name] = process
        self.tails[service.name] = collections.deque(maxlen=30)
        threading.Thread(target=self._pump, args=(service, index, process.stdout), daemon=True).start()

    def check_alive(self) -> None:
        for service in self.services:
            process = self.processes.get(service.name)
            if process is not None and process.poll() is not None and not self.stopping:
                time.sleep(0.2)  # let the pump print the last lines
                raise ServiceDied(service, process.returncode, list(self.tails[service.name]))

    def wait_healthy(self, service: Service, timeout: float) -> None:
        url = f"http://127.0.0.1:{service.port}{service.health_path}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"{service.name} was not healthy at {url} within {timeout:.0f}s")

    def watch(self) -> None:
        while True:
            self.check_alive()
            time.sleep(0.5)

    def stop_all(self, timeout: float = 30) -> None:
        self.stopping = True
        for service in reversed(self.services):
            process = self.processes.get(service.name)
            if process is None or process.poll() is not None:
                continue
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
