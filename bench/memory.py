"""A server's resident memory as the machine pays for it: the proportional set size (PSS) of every process in its
session, sampled while it works.

PSS rather than RSS because a server may be several processes (this backend's API and engine processes, vLLM's
engine core) sharing libraries and memory-mapped weights: summed RSS would count those pages once per process, and
PSS counts each page once in all. Mapped model files count as they are touched, so a server that maps its weights
and one that reads them are measured alike.
"""

from __future__ import annotations

import os
import threading

import psutil


def session_pss(leader: int) -> int:
    """Bytes: the PSS of every live process whose session the server's first process leads."""
    total = 0
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) != leader:
                continue
            total += process.memory_full_info().pss
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue  # gone between listing and reading, or not ours to read
    return total


class PeakMemory:
    """The highest session PSS seen, sampled every `interval` seconds in a thread for as long as the block runs."""

    def __init__(self, leader: int, interval: float = 0.5):
        self.leader = leader
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, session_pss(self.leader))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, session_pss(self.leader))
