"""Whose port is it: the checks that keep the stack from taking another program's server for one of its own.

Before a service starts, its port must be free (`taken`): bound the way uvicorn binds it, so that whatever would
stop the service from binding stops the launcher first, naming the port, the program on it where it can be seen,
and the variable that moves the service. Once started, a health check counts only when the process that answers
on the port is the one the launcher started: the listening socket the probe reaches must be held by that process
or a process of its session (`held_by_session`), read from Linux's /proc. A foreign server on the port answers
200 as happily as ours would, so the answer alone proves nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column
# The local addresses of a socket that a probe to 127.0.0.1 reaches: 127.0.0.1, any IPv4 address, any IPv6 address
# (dual stack) and 127.0.0.1 mapped into IPv6, as /proc/net/tcp and tcp6 write them.
_REACHED_FROM_LOOPBACK = {"0100007F", "00000000", "00000000000000000000000000000000",
                          "0000000000000000FFFF00000100007F"}


def taken(host: str, port: int) -> bool:
    """Whether something already listens where a service would bind (host, port). SO_REUSEADDR as uvicorn sets it,
    so a port held only by connections closing (TIME_WAIT) counts as free, as it does for the service."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def free_port_after(host: str, port: int, tries: int = 50) -> int | None:
    """The first free port above `port`, to suggest."""
    for candidate in range(port + 1, min(port + 1 + tries, 65536)):
        if not taken(host, candidate):
            return candidate
    return None


def _listening_inodes(port: int) -> set[str] | None:
    """The inodes of the sockets listening on `port` that a probe to 127.0.0.1 reaches; None without /proc."""
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if fields[3] == _LISTEN and int(hex_port, 16) == port and address in _REACHED_FROM_LOOPBACK:
                inodes.add(fields[9])
    return inodes if readable else None


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd.path)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def _session_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid pgrp session ...: the command may hold spaces and parentheses, so split after it.
    return int(stat.rpartition(")")[2].split()[3])


def _pids() -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]


def held_by_session(port: int, session: int) -> bool | None:
    """Whether a socket listening on `port` (as a probe to 127.0.0.1 reaches it) is held by a process of the
    session `session` (the launcher starts each service as a session leader: its pid). None where /proc cannot
    tell (not Linux)."""
    inodes = _listening_inodes(port)
    if inodes is None:
        return None
    if not inodes:
        return False
    return any(_socket_inodes(pid) & inodes for pid in _pids() if _session_of(pid) == session)


def holder(port: int) -> str | None:
    """The program listening on `port`, as 'pid N (command line)', where this user may see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    for pid in _pids():
        if _socket_inodes(pid) & inodes:
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                return f"pid {pid} ({command.strip()[:120]})"
            return f"pid {pid}"
    return None
