"""Each request's id: taken from the client's `X-Request-ID` (a plain token) or made here, kept while the request is
served (every log line written meanwhile carries it, ovgenai_common/logs.py; every upstream call passes it on,
upstream.py), echoed in the response's header, and named in one access line per request when it ends. The same
place counts the answers by status and error kind (`http_responses_total`), so that every refusal is counted,
the security and body-limit middlewares' included.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid
import weakref

from prometheus_client import CollectorRegistry, Counter
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ErrorKind

REQUEST_ID_HEADER = "X-Request-ID"
# Only a plain token is kept: an id is for logs and headers, and anything else in it is not ours to forward.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
# Probes and scrapes come every few seconds from orchestrators: their access lines are DEBUG, not INFO.
QUIET_PATHS = frozenset({"/health", "/live", "/metrics", "/v1/health_check"})

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
access_logger = logging.getLogger("ovgenai.access")
_responses: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def responses_counter(registry: CollectorRegistry) -> Counter:
    """The registry's one `http_responses_total` (several apps may share a registry, as tests' do)."""
    if registry not in _responses:
        _responses[registry] = Counter(
            "http_responses", "Answers by HTTP status and error kind (OpenAI's error type; 'ok' below 400), probes "
            "and scrapes left out.", ["status", "kind"], registry=registry,
        )
    return _responses[registry]


def error_kind(status: int) -> str:
    """OpenAI's error type of an answer's status, as the error table (errors.py) gives it; 'ok' below 400."""
    return "ok" if status < 400 else ErrorKind.from_status(status).type


def current_request_id() -> str | None:
    """The id of the request being served in this context (None outside one)."""
    return _request_id.get()


def request_id_from(headers: Headers) -> str:
    """The client's id when it is a plain token, else a new one."""
    given = headers.get(REQUEST_ID_HEADER)
    return given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


class RequestIdMiddleware:
    """Keeps the request's id while it is served, echoes it in the response, and writes one access line."""

    def __init__(self, app: ASGIApp, responses: Counter | None = None):
        self.app = app
        self.responses = responses

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(Headers(scope=scope))
        token = _request_id.set(request_id)
        started = time.perf_counter()
        status = 500  # what the client gets when the app fails before answering

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            path = scope.get("path", "")
            quiet = path in QUIET_PATHS
            access_logger.log(logging.DEBUG if quiet else logging.INFO, "%s %s %d %.1f ms",
                              scope.get("method", ""), path, status, (time.perf_counter() - started) * 1000)
            if self.responses is not None and not quiet:
                self.responses.labels(str(status), error_kind(status)).inc()
            _request_id.reset(token)
