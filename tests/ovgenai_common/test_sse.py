"""A stream that fails after its headers ends with an error event in OpenAI's shape and `[DONE]`, never cut short;
and a client that leaves closes the source, so its `finally` (an engine's abort) runs at once."""

from __future__ import annotations

import asyncio
import json

import httpx
from fastapi import FastAPI

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.sse import frame, sse_response


def app_failing_with(error: Exception) -> FastAPI:
    app = FastAPI()

    async def frames():
        yield frame({"choices": [{"text": "a"}]})
        raise error

    @app.get("/stream")
    async def stream():
        return sse_response(frames())

    return app


async def events(app: FastAPI) -> list[str]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        reply = await http.get("/stream")
    assert reply.status_code == 200
    return [line[len("data: "):] for line in reply.text.splitlines() if line.startswith("data: ")]


async def test_an_unexpected_failure_ends_the_stream_with_an_error_event():
    sent = await events(app_failing_with(OverflowError("int too big to convert")))
    assert sent[-1] == "[DONE]" and json.loads(sent[0])["choices"][0]["text"] == "a"
    error = json.loads(sent[-2])["error"]
    assert error["type"] == "internal_server_error" and error["message"] == "Internal server error."  # no internals


async def test_an_api_error_keeps_its_kind_and_message():
    sent = await events(app_failing_with(APIError(ErrorKind.UNAVAILABLE, "The model is restarting.")))
    error = json.loads(sent[-2])["error"]
    assert sent[-1] == "[DONE]" and error["message"] == "The model is restarting." and error["code"] == 503


async def test_closing_the_stream_closes_its_source():
    closed = asyncio.Event()

    async def frames():
        try:
            while True:
                yield frame({})
                await asyncio.sleep(0)
        finally:
            closed.set()

    response = sse_response(frames())
    iterator = response.body_iterator
    await iterator.__anext__()
    await iterator.aclose()
    assert closed.is_set()
