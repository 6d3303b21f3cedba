"""The one error table: every failure leaves a service in OpenAI's nested error shape.

`{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}`; request validation errors are 400 (not
FastAPI's 422), unknown routes 404, and unexpected exceptions 500 with a sanitized message (the traceback goes to
the log, never to the client).
"""

from __future__ import annotations

import enum
import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from .cancellation import ClientDisconnected

logger = logging.getLogger(__name__)


class ErrorKind(enum.Enum):
    """Each kind of failure with its HTTP status and OpenAI error `type`."""

    INVALID_REQUEST = (400, "invalid_request_error")
    UNAUTHORIZED = (401, "authentication_error")
    FORBIDDEN = (403, "permission_error")
    NOT_FOUND = (404, "not_found_error")
    REQUEST_TIMEOUT = (408, "invalid_request_error")
    CONFLICT = (409, "invalid_request_error")  # the request meets stored state it cannot be served against
    PAYLOAD_TOO_LARGE = (413, "invalid_request_error")
    OVERLOADED = (429, "rate_limit_error")
    INTERNAL = (500, "internal_server_error")
    UPSTREAM = (502, "upstream_error")
    UNAVAILABLE = (503, "unavailable_error")
    TIMEOUT = (504, "timeout_error")

    @property
    def status(self) -> int:
        return self.value[0]

    @property
    def type(self) -> str:
        return self.value[1]

    @classmethod
    def from_status(cls, status: int) -> ErrorKind:
        for kind in cls:
            if kind.status == status:
                return kind
        return cls.INVALID_REQUEST if 400 <= status < 500 else cls.INTERNAL


_TEMPLATE_ERROR = re.compile(r"Minja's error: (.+?)(?: at row \d+, column \d+:|\n|$)", re.S)


def library_reason(error: BaseException) -> str:
    """The reason an OpenVINO (or xgrammar) exception gives, without what is not for clients: OpenVINO's trace of its
    own build's source paths ("Exception from src/...", "Check '...' failed at /home/.../x.cpp:335:") and xgrammar's
    "[10:03:15] /home/.../json_schema_converter.cc:898:" prefix and its failed expression ("Check failed: (...) is
    false:")."""
    # A chat template's refusal (openvino_genai's Minja) gives its reason first, then the template's source lines
    # and caret markers for each frame: the reason, not the last line ("^").
    if (template := _TEMPLATE_ERROR.search(str(error))) is not None:
        return template.group(1).strip()
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    reasons = [line for line in lines if not line.startswith(("Exception from", "Check '"))]
    reason = (reasons or lines or [type(error).__name__])[-1]
    if any(marker in reason for marker in (".cc:", ".cpp:", ".hpp:", ".h:")) and ": " in reason:
        reason = reason.split(": ", 1)[1]
    if reason.startswith("Check failed: ") and " is false: " in reason:
        reason = reason.split(" is false: ", 1)[1]
    return reason.strip() or type(error).__name__


class APIError(Exception):
    """Raised anywhere in a service; rendered by the handler below."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        param: str | None = None,
        code: Any = None,
        status: int | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.code = code
        self.status = status or kind.status  # a relayed upstream 4xx keeps its own status
        self.retry_after = retry_after  # seconds, for a 429 or 503 that knows how long; else RETRY_AFTER_SECONDS

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, self.param, self.code)


def invalid(message: str, param: str | None = None) -> APIError:
    """A 400 for what the client sent, naming the field."""
    return APIError(ErrorKind.INVALID_REQUEST, message, param)


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: Any = None


class ErrorResponse(BaseModel):
    """How every error looks, documented in each service's OpenAPI schema as the `default` response."""

    error: ErrorDetail


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Rewrite FastAPI's generated OpenAPI document to say what the services do: a request that fails validation
    gets 400 (not 422), and any error comes in OpenAI's shape, so each operation's `default` response is that."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    components["ErrorDetail"] = ErrorDetail.model_json_schema()
    components["ErrorResponse"] = {
        **ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}"),
    }
    components["ErrorResponse"].pop("$defs", None)
    default = {
        "description": "An error, in OpenAI's shape: 400 invalid request, 401 missing API key, 403 refused host "
        "or cross-site request, 404 unknown model or route, 409 conflicting stored state, 413 body too large, 429 "
        "at capacity, 503 not ready, 504 upstream timeout.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].pop("422", None)
                operation["responses"]["default"] = default
    return schema


def error_body(
    message: str, kind: ErrorKind = ErrorKind.INVALID_REQUEST, param: str | None = None, code: Any = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind.type, "param": param, "code": code}}


# Seconds a client should wait before sending again a request refused for capacity (429) or while a model loads
# (503): the official clients (openai, LangChain through it) honour Retry-After in their retries.
RETRY_AFTER_SECONDS = 1
# The longest Retry-After sent (openai's client honours one of up to 60 s, and backs off on its own past that).
MAX_RETRY_AFTER = 600


def error_response(error: APIError, headers: dict[str, str] | None = None) -> JSONResponse:
    if error.status in (429, 503):
        headers = {"Retry-After": str(error.retry_after or RETRY_AFTER_SECONDS), **(headers or {})}
    elif error.status == 408:
        # The server gives up on the request (RFC 9110, 15.5.9): without `close`, uvicorn would keep reading the
        # rest of a trickled body on the same connection.
        headers = {"Connection": "close", **(headers or {})}
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _union_member(part: object) -> bool:
    """Pydantic's name for the member of a union that a location goes through ('str', 'list[str]',
    'function-after[...]', a model's class name): not a field of the request (whose names are lower case)."""
    return isinstance(part, str) and (part in _TYPE_NAMES or "[" in part or part[:1].isupper())


_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "tuple"})


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()
    if not errors:
        return "Invalid request.", None
    first = errors[0]
    union = next((i for i, part in enumerate(first.get("loc", ())) if _union_member(part)), None)
    if union is not None:  # each member of the union says why: the one that got furthest is the one meant, and
        # of those as far, one whose type the value had (a list past its bound, not "should be a valid string")
        branches = [e for e in errors if tuple(e.get("loc", ())[:union]) == tuple(first["loc"][:union])]
        first = max(branches, key=lambda e: (len(e.get("loc", ())), not str(e.get("type", "")).endswith("_type")))
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path") and not _union_member(p)]
    param = ".".join(loc) or None
    if first.get("type") == "json_invalid":
        return f"Malformed JSON body: {first.get('msg', 'invalid JSON')}.", None
    message = first.get("msg", "invalid value").removeprefix("Value error, ")
    if first.get("type") == "missing":
        message = (f"Missing required parameter '{param}'." if param else
                   "The request body is empty; it must be a JSON object with the required parameters.")
    elif param:
        message = f"Invalid value for '{param}': {message}."
    return message, param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(ClientDisconnected)
    async def _client_left(_: Request, __: ClientDisconnected) -> Response:
        # Nobody reads it: nginx's "client closed request", for the access line and the response counter.
        return Response(status_code=499)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return error_response(APIError(ErrorKind.INVALID_REQUEST, message, param))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = ErrorKind.from_status(exc.status_code)
        body = error_body(str(exc.detail), kind)
        return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(APIError(ErrorKind.INTERNAL, "Internal server error."))
