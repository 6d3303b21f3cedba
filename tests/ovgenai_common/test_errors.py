"""The one error table: OpenAI's shape for every failure, and when to come back for the ones that pass."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from pydantic import BaseModel

from ovgenai_common.cancellation import ClientDisconnected
from ovgenai_common.errors import APIError, ErrorKind, install_error_handlers, library_reason


def app_raising(error: APIError) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/")
    async def fail():
        raise error

    return app


async def reply_to(error: APIError) -> httpx.Response:
    transport = httpx.ASGITransport(app=app_raising(error))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.get("/")


async def test_capacity_and_loading_say_when_to_retry():
    for kind in (ErrorKind.OVERLOADED, ErrorKind.UNAVAILABLE):
        reply = await reply_to(APIError(kind, "busy"))
        assert reply.status_code == kind.status and reply.headers["retry-after"] == "1"
        assert reply.json() == {"error": {"message": "busy", "type": kind.type, "param": None, "code": None}}


async def test_other_errors_carry_no_retry_after():
    reply = await reply_to(APIError(ErrorKind.INVALID_REQUEST, "bad", "messages"))
    assert reply.status_code == 400 and "retry-after" not in reply.headers
    assert reply.json()["error"]["param"] == "messages"


async def test_a_request_given_up_on_closes_its_connection():
    """A 408 says the server stopped waiting for the request: the connection closes (RFC 9110), else uvicorn would
    read the rest of a trickled body for as long as it came."""
    reply = await reply_to(APIError(ErrorKind.REQUEST_TIMEOUT, "too slow"))
    assert reply.status_code == 408 and reply.headers["connection"] == "close"
    assert "connection" not in (await reply_to(APIError(ErrorKind.INVALID_REQUEST, "bad"))).headers


class PromptBody(BaseModel):
    prompt: str


async def test_a_missing_body_is_named_as_such():
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/completions")
    async def complete(body: PromptBody) -> dict:
        return {"prompt": body.prompt}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        empty = await http.post("/v1/completions", headers={"Content-Type": "application/json"})
        missing = await http.post("/v1/completions", json={"model": "m"})
    assert empty.status_code == 400 and empty.json()["error"]["message"].startswith("The request body is empty")
    assert missing.json()["error"]["message"] == "Missing required parameter 'prompt'."


class InputsBody(BaseModel):
    inputs: str | list[str]
    messages: list[PromptBody] = []


async def test_a_union_member_is_no_part_of_the_field_named():
    """Pydantic's location goes through the union's member ('inputs.str'), which no client sent."""
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/embed")
    async def embed(body: InputsBody) -> dict:  # noqa: ARG001 - only validated
        return {}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        ids = await http.post("/embed", json={"inputs": [[1]]})
        message = await http.post("/embed", json={"inputs": "x", "messages": [{"prompt": 3}]})
    assert ids.status_code == 400 and ids.json()["error"]["param"] == "inputs.0"  # the list member got furthest
    assert message.json()["error"]["param"] == "messages.0.prompt"


async def test_a_client_that_left_is_answered_499_for_the_access_line():
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/completions")
    async def complete() -> dict:
        raise ClientDisconnected()

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        assert (await http.post("/v1/completions")).status_code == 499


MINJA = ("Exception from /home/ci/openvino.genai/src/cpp/src/tokenizer/tokenizer_impl.cpp:855:\nMinja failed to "
         "apply chat template. Possible solutions are\n* Provide a simplified chat template with set_chat_template()."
         "\nMinja's error: Conversation roles must alternate user/assistant at row 1, column 48:\n{% if x %}{{ "
         "raise_exception('Conversation roles must alternate user/assistant') }}{% endif %}\n      ^\n at row 1, "
         "column 1:\n{% if x %}\n^\n\n")


def test_a_chat_template_refusal_is_its_reason_not_a_caret():
    """The reason came first and the template's source and carets after: the client read '^'."""
    assert library_reason(RuntimeError(MINJA)) == "Conversation roles must alternate user/assistant"
    assert library_reason(RuntimeError("Minja's error: Trying to access property '0' on null!")) == \
        "Trying to access property '0' on null!"
