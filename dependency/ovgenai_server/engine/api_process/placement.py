"""Which cores the engine's inference threads run on, and which the serving side (HTTP, tokenizer, SSE) runs on.

A pipeline step is split across the engine's inference threads and waits for the slowest of them, so a thread that
shares its core with the API process, its tokenizer or the client loses time for the whole step: on a 16-core
machine a core kept for serving brings the server level with the in-process engine. On a few cores a core taken from
the engine costs more than it saves (bench/results.md, "Serving overhead"), so `auto` reserves a serving core only
from `RESERVE_FROM_CORES` usable cores.

The cores are the ones this process may use (its affinity: a container's cpuset, `taskset`, a NUMA binding). Under a
CPU quota smaller than those cores (Kubernetes `limits.cpu` without the static CPU manager) the cores are shared with
other containers and no core is this process's own: `auto` then leaves placement alone (the chart sets
`INFERENCE_NUM_THREADS` to the limit). A thread count in the plugin config is the user's choice: `auto` leaves
placement alone then, and with `reserved` it wins over the count chosen here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ServingCore = Literal["auto", "reserved", "shared"]
RESERVE_FROM_CORES = 8


@dataclass(frozen=True)
class Placement:
    engine_cores: tuple[int, ...] | None  # None: the engine shares every core (its affinity left as inherited)
    serving_cores: tuple[int, ...] | None  # None: the API process keeps every core

    def describe(self) -> str:
        if self.engine_cores is None:
            return "engine and serving share every core"
        return f"engine on cores {_ranges(self.engine_cores)}, serving on {_ranges(self.serving_cores or ())}"


def usable_cores() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def cpu_quota(cgroup: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs this cgroup may use by quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`); None when unlimited."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    if quota in ("max", "-1"):
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def plan(cores: tuple[int, ...], mode: ServingCore, quota: float | None = None) -> Placement:
    """`reserved` (or `auto` from RESERVE_FROM_CORES cores of this process's own): the last core serves, the others
    compute."""
    own = quota is None or quota >= len(cores)
    reserve = mode == "reserved" or (mode == "auto" and own and len(cores) >= RESERVE_FROM_CORES)
    if not reserve or len(cores) < 2:
        return Placement(None, None)
    return Placement(cores[:-1], cores[-1:])


def pin_this_process(cores: tuple[int, ...]) -> None:
    """Every thread of this process onto `cores` (Linux affinity is per thread; threads made later inherit it from
    the thread that makes them)."""
    for task in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cores)
        except (ProcessLookupError, PermissionError):  # a thread that ended meanwhile
            continue


def _ranges(cores: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> "0-2,5", as /proc and taskset write core lists."""
    runs: list[list[int]] = []
    for core in cores:
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
