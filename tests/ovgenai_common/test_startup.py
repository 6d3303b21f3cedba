"""Listen first, load second (ovgenai_common/startup.py): the app's startup runs behind a front that answers while it
loads: /live 200, every other route 503 with Retry-After; once started, the app itself; a startup that fails stops
the server, saying why."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from ovgenai_common.startup import RETRY_AFTER, LoadingFront
from tests.support.waiting import until


class Lifespan:
    """The ASGI lifespan messages a server sends the front, and what the front answers."""

    def __init__(self, front: LoadingFront):
        self.inbox: asyncio.Queue[dict] = asyncio.Queue()
        self.sent: list[str] = []
        self.task = asyncio.create_task(front({"type": "lifespan", "state": {}}, self.inbox.get, self._send))

    async def _send(self, message: dict) -> None:
        self.sent.append(message["type"])


def slow_app(release: asyncio.Event, fail: bool = False) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        await release.wait()  # the models loading
        if fail:
            raise RuntimeError("the model file is missing")
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    return app


async def test_the_front_answers_while_the_app_starts_then_hands_over():
    release = asyncio.Event()
    front = LoadingFront(slow_app(release))
    lifespan = Lifespan(front)
    await lifespan.inbox.put({"type": "lifespan.startup"})
    await until(lambda: lifespan.sent == ["lifespan.startup.complete"])  # the server listens while the app loads
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front), base_url="http://t") as http:
        loading = await http.get("/health")
        assert loading.status_code == 503 and loading.headers["Retry-After"] == str(RETRY_AFTER)
        error = loading.json()["error"]
        assert error["type"] == "unavailable_error" and "starting" in error["message"]
        assert (await http.get("/live")).json() == {"status": "alive"}
        release.set()
        await front.ready.wait()
        assert (await http.get("/health")).json() == {"status": "ok"}
    await lifespan.inbox.put({"type": "lifespan.shutdown"})
    await lifespan.task
    assert lifespan.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_a_startup_that_fails_stops_the_server_saying_why():
    release, stopped = asyncio.Event(), []
    front = LoadingFront(slow_app(release, fail=True), stop_server=lambda: stopped.append(True))
    lifespan = Lifespan(front)
    await lifespan.inbox.put({"type": "lifespan.startup"})
    release.set()
    await until(lambda: stopped)
    assert "the model file is missing" in front.failed
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front), base_url="http://t") as http:
        assert "could not start" in (await http.get("/health")).json()["error"]["message"]
    await lifespan.inbox.put({"type": "lifespan.shutdown"})
    await lifespan.task


async def test_a_server_stopped_while_the_app_loads_ends_the_load():
    release = asyncio.Event()
    front = LoadingFront(slow_app(release))
    lifespan = Lifespan(front)
    await lifespan.inbox.put({"type": "lifespan.startup"})
    await until(lambda: lifespan.sent == ["lifespan.startup.complete"])
    await lifespan.inbox.put({"type": "lifespan.shutdown"})
    await lifespan.task  # without waiting for a load that never ends
    assert lifespan.sent[-1] == "lifespan.shutdown.complete"
