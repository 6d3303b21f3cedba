"""Disconnect = abort, for unary requests too: a client that goes away cancels its work (a generation, a batch of
embeddings, an ingest) in every service.

Starlette cancels a streaming response's iterator on disconnect, but keeps running a unary handler to the end;
this races the handler against the client's `http.disconnect`, as vLLM's `with_cancellation` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

T = TypeVar("T")


class ClientDisconnected(Exception):
    """Raised from a unary route whose client left; every service answers it with 499 (errors.py)."""


async def cancel_on_disconnect(request: Request, work: Awaitable[T]) -> T:
    task = asyncio.ensure_future(work)

    async def wait_disconnect() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(wait_disconnect())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if task.cancelled():
        raise ClientDisconnected()
    return task.result()
