"""Waiting in async tests without betting on the clock. `until` polls for a state another task (or a thread) will
reach, its deadline reached only by a failure; `settle` lets every task that can run do so, for a test that then
asserts that something has NOT happened, which no poll can show. The synchronous poll for servers and processes:
servers.wait_until."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable


async def until(condition: Callable[[], object], deadline: float = 5.0, message: str | None = None,
                interval: float = 0.001) -> None:
    """Returns once `condition()` is true; fails past `deadline` seconds, naming the condition (its source line
    unless `message` says it). The loop runs between looks, and so does a thread's work: the interval is short but
    not a busy spin (longer where a look costs the server under test, as a scrape of its metrics does)."""
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"not reached within {deadline:g} s: {message or _source(condition)}")
        await asyncio.sleep(interval)


async def settle(yields: int = 50) -> None:
    """Every task that can run has run, and those it woke, `yields` turns of the loop deep (far more than the chains
    of awaits under test): what is then not done is blocked on something (an event, a future, a lock), not merely
    behind in the queue. No clock: a timer or a thread is not waited for."""
    for _ in range(yields):
        await asyncio.sleep(0)


def _source(condition: Callable[[], object]) -> str:
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)
