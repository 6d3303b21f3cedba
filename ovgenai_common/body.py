"""Request bodies within bounds before any route parses them: a size limit on every body, a smaller one on JSON
bodies, and a nesting-depth limit on JSON, so that `[[[[…` is a 400 rather than a recursion error (a 500).

JSON is JSON as RFC 8259 defines it: UTF-8 text, without NaN, Infinity, numbers past a double's range or unpaired
surrogates. Python's parser, which FastAPI uses, takes more: it guesses UTF-16 or UTF-32 from the bytes, decodes
UTF-8's bytes for a surrogate, and reads NaN, Infinity, 1e999 (as inf) and unpaired surrogate escapes (`"\ud800"`).
A string holding an unpaired surrogate cannot be encoded as UTF-8, so it failed later wherever text is encoded (the
tokenizer, an IPC message, a hash, an error body, a call to another service) as a 500. Such a body is refused here
with a 400 before any route sees it, naming where in the body it was found; `loads` applies the same rules for code
that parses a body or a field itself.

JSON bodies are those FastAPI parses as JSON, decided from the one Content-Type header it reads and as it reads it
(application/json, application/*+json), and bodies without one. A request with two Content-Type headers is a 400:
the gate and the framework could each read another. A charset parameter changes nothing (RFC 8259 defines none):
the bytes are read as UTF-8, as the framework reads them. JSON bodies are read whole (they are bounded by the JSON
limit), checked, and handed on to the app unchanged. Other bodies (uploads, forms, TorchServe's plain-text prompts)
stream through, counted against the general limit, on the routes that take them: where a service names its upload
routes, any other route's body is held to the JSON limit whatever its Content-Type says, for a header must not pick
the larger limit for a route that reads JSON (a 5 MB text/plain body was read whole on the gateway's chat before its
400). A route that takes uploads may hold its body to a `Pace` (a deadline for the whole body, proportional to its
size).
"""

from __future__ import annotations

import asyncio
import email.message
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import APIError, ErrorKind, error_response

# serde_json's limit, which TGI and TEI apply to the same requests; each service's max_json_depth.
MAX_JSON_DEPTH = 128

_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'"[]{},:')


def _brackets(body: bytes) -> bytes:
    """The JSON text's brackets outside its strings, each as `[` or `]`. In bytes operations alone (a regular
    expression over every string took 200 ms of the event loop for a body of 600,000 short strings): escapes out,
    everything but quotes, brackets and separators out, then the strings without a bracket (now `""`); a string that
    held one is cut out between its quotes."""
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in text:
        text = b"".join(text.split(b'"')[::2])
    return text.translate(_AS_SQUARE, _NOT_BRACKETS)


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
    brackets = _brackets(body)
    stop = _nesting(max_depth).match(brackets).end()
    return stop < len(brackets) and brackets[stop] == ord("[")


def depth_error(max_depth: int, param: str | None = None) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, f"JSON nested more than {max_depth} levels deep.", param,
                    code="json_too_deep")


JSON_RULES = ("JSON is UTF-8 text with no NaN or Infinity, no number beyond a double's range, and no unpaired "
              "surrogate escape such as \\ud800 (RFC 8259)")
_SURROGATE = re.compile("[\ud800-\udfff]")
_PATH_PART = 64  # characters of a key named in an error


def _where(param: str | None) -> str:
    return "body" if param is None else f"in '{param}'"


def not_utf8(param: str | None = None) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, f"The JSON {_where(param)} is not UTF-8: JSON is UTF-8 text without "
                    "a byte order mark (RFC 8259); a charset parameter does not change that.", param,
                    code="json_not_utf8")


def json_text(raw: bytes, param: str | None = None) -> str:
    """The bytes as JSON text: UTF-8, strictly. Python's parser would have guessed UTF-16 or UTF-32 from them, or
    decoded UTF-8's bytes for a surrogate (surrogatepass); neither is JSON."""
    if json.detect_encoding(raw) == "utf-8":  # not "utf-8-sig" (a byte order mark), "utf-16-le", ...
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise not_utf8(param)


def _key(part: str | int) -> str:
    """A path's part as an error may show it: a surrogate escaped (the error body is UTF-8 too), a long key cut."""
    text = part.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(part, str) else str(part)
    return text if len(text) <= _PATH_PART else text[:_PATH_PART] + "…"


def _outside_json(value: Any) -> tuple[list[str | int], str] | None:
    """The first place, in document order, where Python's reading holds what JSON has not, and what it holds."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path, "an unpaired surrogate"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path, "NaN, Infinity or a number beyond a double's range"
        elif isinstance(item, dict):
            for key in item:
                if _SURROGATE.search(key):
                    return [*path, key], "an unpaired surrogate in a key"
            stack.extend((child, [*path, key]) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((child, [*path, index]) for index, child in reversed(list(enumerate(item))))
    return None


def _invalid(parsed: Any, param: str | None) -> APIError | None:
    """The 400 for a parsed value that JSON could not have held, naming where it is: the body's path (messages.0.
    content) as `param`, or within a field the caller names."""
    found = _outside_json(parsed)
    if found is None:
        return None
    path, what = found
    inside = ".".join(_key(part) for part in path)
    if param is None:
        where, param = (f"in '{inside}'" if inside else "body"), inside or None
    else:
        where = f"in '{param}'" + (f" at '{inside}'" if inside else "")
    return APIError(ErrorKind.INVALID_REQUEST, f"Malformed JSON {where}: {what}. {JSON_RULES}.", param,
                    code="invalid_json")


def not_json(body: bytes, param: str | None = None) -> APIError | None:
    """The error for a body Python's parser would read though it is not JSON (not UTF-8; NaN, Infinity, a number
    out of range, an unpaired surrogate); None for JSON, and for a UTF-8 text malformed either way (the parser
    that reads it says so)."""
    try:
        msgspec.json.decode(body)  # strict: UTF-8 only, RFC 8259's values only; for JSON the only parse
        return None
    except (msgspec.DecodeError, ValueError):  # ValueError: bytes that are not UTF-8
        pass
    try:
        parsed = json.loads(json_text(body, param))
    except APIError as error:
        return error
    except (ValueError, RecursionError):
        return None
    return _invalid(parsed, param)


def loads(body: bytes | str, max_depth: int, param: str | None = None) -> Any:
    """JSON parsed by the same rules, for code that parses a body or a field itself."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if too_deep(raw, max_depth):
        raise depth_error(max_depth, param)
    try:  # the strict parser first: for JSON it is the only parse
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, ValueError):
        pass
    text = body if isinstance(body, str) else json_text(raw, param)
    try:  # what is wrong, in Python's words; or what Python takes though JSON does not (below)
        parsed = json.loads(text)
    except (ValueError, RecursionError) as error:
        reason = str(error)
        if "int_max_str_digits" in reason:  # Python's limit, worded for Python programmers
            reason = f"an integer has more than {sys.get_int_max_str_digits()} digits"
        raise APIError(ErrorKind.INVALID_REQUEST, f"Malformed JSON {_where(param)}: {reason}.", param) from error
    if (error := _invalid(parsed, param)) is not None:
        raise error
    return parsed


def is_json(content_type: bytes | None) -> bool:
    """Whether FastAPI parses a body with this Content-Type as JSON, decided as FastAPI decides it (its routing's
    email.message parse: application/json or application/<anything>+json); no Content-Type counts as JSON too."""
    if not content_type:
        return True
    message = email.message.Message()
    message["content-type"] = content_type.decode("latin-1")  # as Starlette decodes a header
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


@dataclass(frozen=True)
class Pace:
    """How fast an upload must arrive, as a whole: its n-th byte within `grace` + n / `min_rate` seconds of the
    start. A per-read timeout alone let a client trickle a byte every few seconds into a body for as long as it
    liked; under a pace a body of any size has a deadline, proportional to its size, with a floor for small ones.
    (Apache's mod_reqtimeout applies the same rule: body=20,MinRate=500.)"""

    min_rate: float  # bytes per second, averaged over the whole body once the grace has passed
    grace: float  # seconds any body may take, whatever its size

    def too_slow(self, received: int, elapsed: float) -> APIError:
        return APIError(ErrorKind.REQUEST_TIMEOUT, f"The upload arrived too slowly: {received} bytes in "
                        f"{elapsed:.0f} s; after its first {self.grace:g} s a body must average at least "
                        f"{self.min_rate:g} bytes/s.", code="upload_too_slow")


def paced(receive: Receive, pace: Pace) -> Receive:
    """`receive` held to `pace`, counted from this call: the next part of the body must come by the time the bytes
    so far allow; a slower body raises a 408 (`Pace.too_slow`). After the body, the client's disconnect as it
    comes."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    received, complete = 0, False

    async def paced_receive() -> Message:
        nonlocal received, complete
        if complete:
            return await receive()
        try:
            async with asyncio.timeout_at(started + pace.grace + (received + 1) / pace.min_rate):
                message = await receive()
        except TimeoutError:
            raise pace.too_slow(received, loop.time() - started) from None
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            complete = not message.get("more_body", False)
        return message

    return paced_receive


def _header(scope: Scope, name: bytes) -> list[bytes]:
    return [value for key, value in scope.get("headers", ()) if key == name]


class BodyLimitMiddleware:
    """413 beyond the limits (Content-Length, then the bytes as they arrive); 400 for two Content-Type headers, for
    JSON nested too deep, or not JSON though Python's parser would take it; 408 for a body that does not arrive in
    time (uvicorn has no such limit: a client trickling a body in held its connection, and a worker's memory, for as
    long as it liked). `upload_paths`: the routes whose bodies other than JSON may reach the general limit (None:
    every route's); any other body is read whole within the JSON limit before the app sees it."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_json_bytes: int, max_json_depth: int,
                 body_timeout: float = 60.0, upload_paths: Iterable[str] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_bytes = min(max_json_bytes, max_bytes)
        self.max_json_depth = max_json_depth
        self.body_timeout = body_timeout
        self.upload_paths = None if upload_paths is None else frozenset(upload_paths)

    def too_slow(self) -> APIError:
        return APIError(ErrorKind.REQUEST_TIMEOUT, f"The request body did not arrive within {self.body_timeout:g} s.")

    def too_large(self, limit: int) -> APIError:
        return APIError(ErrorKind.PAYLOAD_TOO_LARGE, f"Request body exceeds the limit of {limit} bytes.")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The first of each, as Starlette's request.headers reads it; two Content-Types are refused outright.
        content_types = _header(scope, b"content-type")
        if len(content_types) > 1:
            error = APIError(ErrorKind.INVALID_REQUEST, f"The request has {len(content_types)} Content-Type headers; "
                             "send one.", code="content_type_repeated")
            await error_response(error)(scope, receive, send)
            return
        json_body = is_json(content_types[0] if content_types else None)
        upload = not json_body and (self.upload_paths is None or scope["path"] in self.upload_paths)
        limit = self.max_bytes if upload else self.max_json_bytes
        length = next(iter(_header(scope, b"content-length")), b"")
        if length.isdigit() and int(length) > limit:
            await error_response(self.too_large(limit))(scope, receive, send)
            return
        if upload:
            await self.app(scope, self.counted(receive, limit), send)
        else:
            await self.checked(scope, receive, send, limit, json_body)

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

    async def checked(self, scope: Scope, receive: Receive, send: Send, limit: int, json_body: bool) -> None:
        """The body read whole within `limit`, checked when it is JSON, then handed on to the app."""
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
        if json_body and body and too_deep(body, self.max_json_depth):
            await error_response(depth_error(self.max_json_depth))(scope, receive, send)
            return
        if json_body and body and (error := not_json(body)) is not None:
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
