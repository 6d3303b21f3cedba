"""Starting, watching and stopping the stack's processes.

Each service runs in its own session (so a terminal's Ctrl-C reaches only the launcher, which then stops the
services in reverse order); its output is streamed with a `name |` prefix. A service that exits while the stack
starts is reported with its last log lines and the whole stack stops with a non-zero exit, rather than being left
half-alive. Once the stack is up, a service that exits is restarted, as compose's `restart: unless-stopped` does,
after a backoff that doubles with each restart that does not become healthy again; after `max_restarts` such
restarts in a row the stack gives up and stops.

A service starts only on a free port, and is healthy only when its own process answers there (ports.py): another
program on the port stops the stack with the port, the program and the variable that moves the service, instead of
its answers being taken for the service's.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time

from ovgenai_common.upstream import probe_sync

from . import ports
from .services import Service, local

COLORS = ("\033[36m", "\033[35m", "\033[33m", "\033[32m")
RESET = "\033[0m"


class ServiceDied(RuntimeError):
    def __init__(self, service: Service, code: int | None, tail: list[str]):
        super().__init__(f"{service.name} exited with code {code}")
        self.service = service
        self.code = code
        self.tail = tail


class PortTaken(RuntimeError):
    """Another program listens on a service's port."""

    def __init__(self, service: Service):
        super().__init__(port_taken_message(service))
        self.service = service


def host_of(service: Service) -> str:
    return service.env.get("HOST", "127.0.0.1")


def port_taken_message(service: Service) -> str:
    host, port = host_of(service), service.port
    who = ports.holder(port)
    free = ports.free_port_after(host, port)
    move = f"{service.port_variable}={free if free else '<port>'}" if service.port_variable else None
    return (f"port {port} ({service.name}) is already in use" + (f" by {who}" if who else " by another program")
            + ": stop that program" + (f", or move the {service.name} with {move} (e.g. `{move} make run`, or "
                                       f"--{service.port_variable.lower()} {free or '<port>'})" if move else "")
            + ".")


class Restarts:
    """One service's restart bookkeeping: how often, and when the next attempt is due."""

    def __init__(self, first_backoff: float, max_backoff: float):
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.total = 0
        self.failed_in_a_row = 0  # restarts that died before becoming healthy
        self.due: float | None = None
        self.healthy = True

    def schedule(self) -> float:
        if not self.healthy:
            self.failed_in_a_row += 1
        backoff = min(self.max_backoff, self.first_backoff * 2 ** self.failed_in_a_row)
        self.total += 1
        self.healthy = False
        self.due = time.monotonic() + backoff
        return backoff


class Supervisor:
    def __init__(self, services: list[Service], color: bool | None = None, max_restarts: int = 5,
                 first_backoff: float = 1.0, max_backoff: float = 30.0):
        self.services = services
        self.processes: dict[str, subprocess.Popen] = {}
        self.tails: dict[str, collections.deque[str]] = {}
        self.color = sys.stdout.isatty() if color is None else color
        self._write_lock = threading.Lock()
        self.stopping = False
        self.max_restarts = max_restarts
        self.restarts = {s.name: Restarts(first_backoff, max_backoff) for s in services}
        self.index = {s.name: i for i, s in enumerate(services)}

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

    def check_port(self, service: Service) -> None:
        if ports.taken(host_of(service), service.port):
            raise PortTaken(service)

    def start(self, service: Service, index: int) -> None:
        self.check_port(service)
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

    def answers_itself(self, service: Service) -> bool:
        """Whether the socket a probe reaches on the service's port is held by the process started for it (or one of
        its session: the backend's engine runs in a child). Where /proc cannot tell (not Linux), the port check
        before the start has to do."""
        process = self.processes.get(service.name)
        if process is None or process.poll() is not None:
            return False
        return ports.held_by_session(service.port, process.pid) is not False

    def healthy(self, service: Service) -> bool:
        answered = probe_sync(local(service.port), service.name, paths=(service.health_path,), timeout=2)[0]
        return answered and self.answers_itself(service)

    def wait_healthy(self, service: Service, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            if probe_sync(local(service.port), service.name, paths=(service.health_path,), timeout=2)[0]:
                if self.answers_itself(service):
                    return
                self.check_alive()
                raise PortTaken(service)  # another program's server took the port after the check
            time.sleep(0.25)
        url = local(service.port) + service.health_path
        raise TimeoutError(f"{service.name} was not healthy at {url} within {timeout:.0f}s")

    def watch(self, interval: float = 0.5) -> None:
        """Keep the running stack up: restart what exits, with backoff; raise ServiceDied when one gives up."""
        while True:
            now = time.monotonic()
            for service in self.services:
                restarts = self.restarts[service.name]
                process = self.processes[service.name]
                if restarts.due is not None:
                    if now >= restarts.due:
                        restarts.due = None
                        self.check_port(service)  # not restarted into another program's port: stop, saying so
                        self.say(f"stack    | restarting {service.name} (restart {restarts.total})")
                        self.start(service, self.index[service.name])
                elif process.poll() is not None:
                    self._on_exit(service, process.returncode)
                elif not restarts.healthy and self.healthy(service):
                    restarts.healthy = True
                    restarts.failed_in_a_row = 0
                    self.say(f"stack    | {service.name} is healthy again")
            time.sleep(interval)

    def _on_exit(self, service: Service, code: int | None) -> None:
        time.sleep(0.2)  # let the pump print the last lines
        tail = list(self.tails[service.name])
        restarts = self.restarts[service.name]
        if restarts.failed_in_a_row + (not restarts.healthy) >= self.max_restarts:
            raise ServiceDied(service, code, tail)
        backoff = restarts.schedule()
        self.say(f"stack    | {service.name} exited with code {code}; its last lines:")
        for line in tail[-10:]:
            self.say(f"stack    |   {line}")
        self.say(f"stack    | restarting {service.name} in {backoff:.0f}s "
                 f"({restarts.total} restart(s) so far, {restarts.failed_in_a_row} in a row without becoming healthy)")

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
