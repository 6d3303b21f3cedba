"""Disconnect = abort for unary requests (ovgenai_common/cancellation.py): the handler's work raced against the
client's `http.disconnect`: the work's answer when it comes first, its cancellation and ClientDisconnected (a 499,
test_errors.py) when the client leaves first, its own error when it fails."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from ovgenai_common.cancellation import ClientDisconnected, cancel_on_disconnect


class Client:
    """A request's receive channel: what the client sends, when the test says."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[dict] = asyncio.Queue()
        self.read = asyncio.Event()  # the server read a message
        self.request = Request({"type": "http", "method": "POST", "path": "/", "headers": []}, self.receive)

    async def receive(self) -> dict:
        message = await self.messages.get()
        self.read.set()
        return message

    def leave(self) -> None:
        self.messages.put_nowait({"type": "http.disconnect"})


class Work:
    """A handler's work that ends when the test says, and says whether it was cancelled."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = False

    async def run(self) -> str:
        self.started.set()
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "answer"


async def test_the_work_that_ends_first_gives_its_answer():
    client, work = Client(), Work()
    racing = asyncio.ensure_future(cancel_on_disconnect(client.request, work.run()))
    await work.started.wait()
    work.done.set()
    assert await racing == "answer" and not work.cancelled


async def test_a_client_that_leaves_first_cancels_the_work():
    client, work = Client(), Work()
    racing = asyncio.ensure_future(cancel_on_disconnect(client.request, work.run()))
    await work.started.wait()
    client.leave()
    with pytest.raises(ClientDisconnected):
        await racing
    assert work.cancelled


async def test_other_messages_from_the_client_are_not_a_disconnect():
    client, work = Client(), Work()
    client.messages.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    racing = asyncio.ensure_future(cancel_on_disconnect(client.request, work.run()))
    await work.started.wait()
    await client.read.wait()  # the body message was read, and the race goes on
    assert not racing.done()
    work.done.set()
    assert await racing == "answer"


async def test_a_failing_work_raises_its_own_error():
    async def failing() -> str:
        raise ValueError("the engine said no")

    with pytest.raises(ValueError, match="the engine said no"):
        await cancel_on_disconnect(Client().request, failing())
