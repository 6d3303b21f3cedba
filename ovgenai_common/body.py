"""Request bodies within bounds before any route parses them: a size limit on every body, a smaller one on JSON
bodies, and a nesting-depth limit on JSON, so that `[[[[…` is a 400 rather than a recursion error (a 500).

JSON is JSON as RFC 8259 defines it. Python's parser, which FastAPI uses, also takes NaN, Infinity, numbers past a
double's range (as inf) and unpaired surrogate escapes (`"\ud800"`): a string holding one cannot be encoded as
UTF-8, so it failed later wherever text is encoded (the tokenizer, an IPC message, a hash, an error body) as a 500.
Such a body is refused here with a 400 before any route sees it.

JSON bodies are those FastAPI parses as JSON: no Content-Type, `application/json` or `application/*+json`. They are
read whole (they are bounded by the JSON limit), checked, and handed on to the app unchanged. Other bodies (uploads,
forms, TorchServe's plain-text prompts) stream through, counted against the general limit.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from functools import cache
from typing import Any

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import APIError, ErrorKind, error_response

# serde_json's limit, which TGI and TEI apply to the same requests; each service's max_json_depth.
MAX_JSON_DEPTH = 128

# A JSON string, escapes included (possessive: linear time whatever the input).
_STRINGS = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


@cache
def _nesting(levels: int) -> re.Pattern[bytes]:
    """Brackets nested at most `levels` deep; a bracket left open at the end counts as closed there."""
    pattern = b""
    for _ in range(levels):
        pattern = rb"(?:\[" + pattern + rb"(?:\]|\Z))*+"
    return re.compile(pattern)


def too_deep(body: bytes, max_depth: int) -> bool:
    """Whether any array or object in this JSON text is nested more than `max_depth` deep (strings skipped).

    A regular expression of `max_depth` nested possessive groups matches the brackets as far as they stay within
    the depth; it can only stop at an opening bracket when that bracket is one level too deep (at a closing one,
    the text is malformed, which the parser reports). Linear in the body, and run in C.
    """
    brackets = _STRINGS.sub(b"", body).translate(_AS_SQUARE, _NOT_BRACKETS)
    stop = _nesting(max_depth).match(brackets).end()
    return stop < len(brackets) and brackets[stop] == ord("[")


def depth_error(max_depth: int, param: str | None = None) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, f"JSON nested more than {max_depth} levels deep.", param,
                    code="json_too_deep")


def not_json(body: bytes, param: str | None = None) -> APIError | None:
    """The error for a text Python's parser takes that is not JSON (NaN, Infinity, a number out of range, an unpaired
    surrogate); None for JSON, and for a text malformed either way (the parser that reads it says so)."""
    try:
        msgspec.json.decode(body)
        return None
    except (msgspec.DecodeError, ValueError):  # ValueError: bytes that are not UTF-8
        try:
            json.loads(body.decode("utf-8"))  # as UTF-8 only: json.loads would take UTF-16 bytes too
        except (ValueError, RecursionError):
            return None
    where = "body" if param is None else f"in '{param}'"
    return APIError(ErrorKind.INVALID_REQUEST, f"Malformed JSON {where}: JSON has no NaN or Infinity, no number "
                    "beyond a double's range, and no unpaired surrogate escape such as \\ud800.", param)


def loads(body: bytes | str, max_depth: int, param: str | None = None) -> Any:
    """JSON parsed by the same rules, for code that parses a body or a field itself."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if too_deep(raw, max_depth):
        raise depth_error(max_depth, param)
    try:  # the strict parser first: for JSON it is the only parse
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, ValueError):
        pass
    try:  # what is wrong, in Python's words; or what Python takes though JSON does not (below)
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as error:
        where = "body" if param is None else f"in '{param}'"
        reason = str(error)
        if "int_max_str_digits" in reason:  # Python's limit, worded for Python programmers
            reason = f"an integer has more than {sys.get_int_max_str_digits()} digits"
        raise APIError(ErrorKind.INVALID_REQUEST, f"Malformed JSON {where}: {reason}.", param) from error
    if (error := not_json(raw, param)) is not None:
        raise error
    return parsed  # UTF-16 or UTF-32 bytes, which Python's parser reads as before


def is_json(content_type: bytes | None) -> bool:
    """What FastAPI parses as JSON: no Content-Type, application/json, application/<anything>+json."""
    if not content_type:
        return True
    kind = content_type.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))


class BodyLimitMiddleware:
    """413 beyond the limits (Content-Length, then the bytes as they arrive); 400 for JSON nested too deep, or not
    JSON though Python's parser would take it; 408 for a body that does not arrive in time (uvicorn has no such
    limit: a client trickling a body in held its connection, and a worker's memory, for as long as it liked)."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_json_bytes: int, max_json_depth: int,
                 body_timeout: float = 60.0):
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_bytes = min(max_json_bytes, max_bytes)
        self.max_json_depth = max_json_depth
        self.body_timeout = body_timeout

    def too_slow(self) -> APIError:
        return APIError(ErrorKind.REQUEST_TIMEOUT, f"The request body did not arrive within {self.body_timeout:g} s.")

    def too_large(self, limit: int) -> APIError:
        return APIError(ErrorKind.PAYLOAD_TOO_LARGE, f"Request body exceeds the limit of {limit} bytes.")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        json_body = is_json(headers.get(b"content-type"))
        limit = self.max_json_bytes if json_body else self.max_bytes
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            await error_response(self.too_large(limit))(scope, receive, send)
            return
        if json_body:
            await self.checked_json(scope, receive, send, limit)
        else:
            await self.app(scope, self.counted(receive, limit), send)

    def counted(self, receive: Receive, limit: int) -> Receive:
        received, complete = 0, False

        async def limited_receive() -> Message:
            nonlocal received, complete
            if complete:  # after the body: the client's disconnect, which a streaming response waits for as long
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.body_timeout)
            except TimeoutError:
                raise self.too_slow() from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise self.too_large(limit)
                complete = not message.get("more_body", False)
            return message

        return limited_receive

    async def checked_json(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # the client left before sending it all
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await error_response(self.too_large(limit))(scope, receive, send)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await error_response(self.too_slow())(scope, receive, send)
            return
        body = b"".join(chunks)
        if body and too_deep(body, self.max_json_depth):
            await error_response(depth_error(self.max_json_depth))(scope, receive, send)
            return
        if body and (error := not_json(body)) is not None:
            await error_response(error)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # after the body: the client's disconnect, which streaming responses listen for
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
