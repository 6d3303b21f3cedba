"""Where a measured run's CPU time went: the server's processes, and the load generator that drove it.

On a machine whose cores the server shares with its client, the server cannot reach the in-process engine's
throughput by however much CPU the client and the API process take from the engine's inference threads. Counting
each side's CPU seconds per output token says how much of a gap that is, and how much is left to explain.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

import psutil


def tree_cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process's own user+system seconds, those of every process below it), as far as they are alive."""
    root = psutil.Process(pid)
    own = sum(root.cpu_times()[:2])
    below = 0.0
    for child in root.children(recursive=True):
        try:
            below += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:  # ended between listing and reading
            continue
    return own, below


def this_process_and_waited_children() -> float:
    """User+system seconds of this process (every thread) and of the children it has waited for."""
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@dataclass
class CpuAccount:
    """CPU seconds spent during one run, by side."""

    seconds: dict[str, float]

    def per_token_ms(self, output_tokens: int) -> dict[str, float]:
        return {side: 1000 * spent / output_tokens for side, spent in self.seconds.items()}

    def share_of(self, cores: int, duration: float) -> dict[str, float]:
        """Each side's fraction of what `cores` cores could give in `duration` seconds."""
        return {side: spent / (cores * duration) for side, spent in self.seconds.items()}


class CpuMeter:
    """Counts, over the block, the CPU of this process with the children it waits for meanwhile (the load generator
    and its probe), of named server processes, and of the processes below named ones (the backend's engine)."""

    def __init__(self, processes: dict[str, int], descendants: dict[str, int] | None = None):
        self.processes = processes  # label -> pid: that process alone
        self.descendants = descendants or {}  # label -> pid: every process below it
        self.account: CpuAccount | None = None

    def _read(self) -> dict[str, float]:
        trees = {pid: tree_cpu_seconds(pid) for pid in {*self.processes.values(), *self.descendants.values()}}
        readings = {"load generator": this_process_and_waited_children()}
        readings.update({label: trees[pid][0] for label, pid in self.processes.items()})
        readings.update({label: trees[pid][1] for label, pid in self.descendants.items()})
        return readings

    def __enter__(self) -> CpuMeter:
        self._before = self._read()
        return self

    def __exit__(self, *exc) -> None:
        after = self._read()
        self.account = CpuAccount({side: after[side] - self._before[side] for side in after})
