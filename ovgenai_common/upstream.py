"""Calling another service: the one home for how a service talks to those it depends on (the LLM microservice to
its backend; the gateway to the LLM, embedding and rerank services; the stack launcher waiting for each service).

Addresses. A service is configured by its base URL, with or without a trailing `/v1` (OPEA's guides write both):
`api_base` removes it, `openai_base` puts exactly one back for OpenAI clients.

Clients. `new_client` pools connections, with a connect and a read timeout. A failed connection is retried once:
nothing was sent, so no request ever runs twice.

Sending again. A request may be sent again (to the same service, or to another replica of it) only when it
certainly ran nothing there; those failures are `NotRun` errors, and only these:

- no connection: it failed or timed out, or no pooled connection came free (the request was never sent);
- 429: an admission refusal (too many requests), which every OpenAI server (this backend, vLLM, TGI, OpenAI) sends
  only before it runs a request;
- a 404 that is not about the model: the address serves no such route, so nothing ran.

Anything else may have run, and is returned to the client, never sent elsewhere: a request that made a backend fail
(its engine stopped, its connection reset after the body was sent) would make the next replica fail too, and the
next. A 503 is among them: this backend answers 503 both before running a request (the model is loading) and when
its engine stopped while running it ("please retry"), in the same shape, so the status cannot say which.

Failures become our errors (`APIError`) by one rule, said with the service's name and never its address (the log
has the address, clients need not learn the internal network):

- no answer: a connection that fails is 503; one that breaks after the request was sent (reset, closed before the
  answer) is 502; an answer that does not come in time, 504;
- a 4xx answer is the upstream's judgement of the request (a bad parameter, a missing key, too many requests): it
  passes through with its status, param and code, and its message said as the service's ("The backend refused the
  request: ...", since the client may not know which service it reached);
- except a 404: one about the model (code `model_not_found`, or param `model`) passes through as 404; any other 404
  means that the address serves no such route, a misconfigured endpoint, and is 503 (the dependency is unusable,
  as readiness says);
- 503 and 504 keep their kind; any other 5xx is 502.

Health. `probe` asks `/health`; a server without one (404) is asked OPEA's `/v1/health_check`, then `/v1/models`, so
our services, TEI, OPEA's services and any OpenAI server can all be checked. `probe_sync` is the same for threads.

Request ids. The id of the request being served (request_context.py: the client's `X-Request-ID`, or one made) is
passed on with every upstream call made while it is served, with the trace context when tracing is on
(tracing.py): every client made here sends them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import httpx

from .errors import MAX_RETRY_AFTER, APIError, ErrorKind
from .request_context import REQUEST_ID_HEADER, current_request_id
from .tracing import inject_trace_context

logger = logging.getLogger(__name__)

HEALTH_PATHS = ("/health", "/v1/health_check", "/v1/models")
CONNECT_RETRIES = 1
# A pooled connection is dropped after this long idle, before the server's keep-alive timeout (uvicorn's: 5 s)
# closes it: a request sent on a connection the server is closing breaks after it was sent, and is not sent again.
KEEPALIVE_SECONDS = 4.0
# Failures before any byte of the request left: the request never reached the service.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def api_base(url: str) -> str:
    """The service's root: trailing slashes and one `/v1` removed."""
    return url.strip().rstrip("/").removesuffix("/v1").rstrip("/")


def openai_base(url: str) -> str:
    """The base URL an OpenAI client takes: the root and `/v1`."""
    return api_base(url) + "/v1"


async def _send_request_context(request: httpx.Request) -> None:
    """The served request's id and, when traced, the current span's `traceparent`, on a call made for it."""
    request_id = current_request_id()
    if request_id and REQUEST_ID_HEADER not in request.headers:
        request.headers[REQUEST_ID_HEADER] = request_id
    inject_trace_context(request.headers)


def new_client(
    base_url: str = "",
    *,
    api_key: str | None = None,
    timeout: httpx.Timeout | float = 30.0,
    max_connections: int = 100,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """A pooled client for one service (`transport` replaces the network in tests)."""
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                          keepalive_expiry=KEEPALIVE_SECONDS)
    return httpx.AsyncClient(
        base_url=api_base(base_url) if base_url else "",
        headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
        timeout=timeout,
        # httpx retries only connections that failed, before any byte of the request was sent.
        transport=transport or httpx.AsyncHTTPTransport(retries=CONNECT_RETRIES, limits=limits),
        event_hooks={"request": [_send_request_context]},
    )


# ---- failures -----------------------------------------------------------------------------------------------


class NotRun(APIError):
    """A failure after which the request certainly ran nothing at the service: it may be sent again, to it or to
    another replica (the rule in the module's docstring). Any other APIError may have run."""


def _error_fields(response: httpx.Response) -> dict[str, Any]:
    """The upstream's error, in OpenAI's shape, FastAPI's `detail` or plain text."""
    try:
        body = response.json()
    except (ValueError, httpx.ResponseNotRead):
        try:
            return {"message": response.text[:500]}
        except httpx.ResponseNotRead:
            return {}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"]
    if isinstance(body, dict) and "detail" in body:
        return {"message": str(body["detail"])[:500]}
    return {"message": str(body)[:500]}


def _retry_after(response: httpx.Response) -> int | None:
    value = response.headers.get("Retry-After", "")
    return min(int(value), MAX_RETRY_AFTER) if value.isdigit() and int(value) > 0 else None


def answer_error(service: str, response: httpx.Response) -> APIError:
    """An upstream's answer of 400 or more, by the rule in the module's docstring."""
    status = response.status_code
    fields = _error_fields(response)
    message = str(fields.get("message") or f"The {service} answered {status}.")
    if status == 404 and fields.get("code") != "model_not_found" and fields.get("param") != "model":
        return NotRun(ErrorKind.UNAVAILABLE, f"The {service} has no such route (it answered 404: {message}); "
                                             "its endpoint setting is wrong.")
    retry_after = _retry_after(response)  # the upstream's own estimate of the wait, relayed to the client
    if status == 429:
        return NotRun(ErrorKind.OVERLOADED, f"The {service} refused the request: {message}", fields.get("param"),
                      fields.get("code"), status, retry_after)
    if 400 <= status < 500:
        return APIError(ErrorKind.from_status(status), f"The {service} refused the request: {message}",
                        fields.get("param"), fields.get("code"), status, retry_after)
    if status in (503, 504):
        return APIError(ErrorKind.from_status(status), f"The {service} answered {status}: {message}",
                        retry_after=retry_after)
    return APIError(ErrorKind.UPSTREAM, f"The {service} failed ({status}): {message}")


def transport_error(service: str, error: httpx.HTTPError) -> APIError:
    if isinstance(error, NOT_SENT):
        return NotRun(ErrorKind.UNAVAILABLE, f"The {service} is unreachable ({type(error).__name__}).")
    if isinstance(error, httpx.TimeoutException):
        return APIError(ErrorKind.TIMEOUT, f"The {service} timed out.")
    if isinstance(error, httpx.TransportError):  # the connection broke after the request left: it may have run
        return APIError(ErrorKind.UPSTREAM, f"The {service}'s connection broke before it answered "
                                            f"({type(error).__name__}).")
    return APIError(ErrorKind.UNAVAILABLE, f"The {service} is unavailable ({type(error).__name__}).")


def upstream_error(service: str, error: BaseException) -> APIError:
    """Any failure of a call to `service`: ours as it is, httpx's, or that of a client built on httpx (openai's
    errors carry the httpx response, or have the httpx error as their cause)."""
    if isinstance(error, APIError):
        return error
    response = getattr(error, "response", None)
    if isinstance(response, httpx.Response) and response.status_code >= 400:
        return answer_error(service, response)
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, httpx.HTTPError):
            return transport_error(service, cause)
        cause = cause.__cause__
    if type(error).__name__ == "APITimeoutError":  # openai's, when it raised it without an httpx cause
        return APIError(ErrorKind.TIMEOUT, f"The {service} timed out.")
    return APIError(ErrorKind.UNAVAILABLE, f"The {service} is unavailable ({type(error).__name__}).")


class Upstream:
    """A service this one calls: a pooled client for its base URL, a connection of its own for health checks
    (so that they never queue behind streams), and its failures said under its name."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | float = 30.0,
        health_timeout: float = 3.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.name = name
        self.base_url = api_base(url)
        self.client = new_client(self.base_url, api_key=api_key, timeout=timeout, max_connections=max_connections,
                                 transport=transport)
        self.health_client = new_client(self.base_url, api_key=api_key, timeout=health_timeout, max_connections=1,
                                        transport=transport)

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.health_client.aclose()

    def error(self, error: BaseException) -> APIError:
        """`upstream_error`, with the address logged."""
        api_error = upstream_error(self.name, error)
        if api_error is not error:
            logger.warning("%s at %s: %s (%s)", self.name, self.base_url, api_error.message, type(error).__name__)
        return api_error

    async def request(self, method: str, path: str, *, json: Any = None, stream: bool = False,
                      timeout: httpx.Timeout | float | None = None) -> httpx.Response:
        """The answer when it is below 400 (unread when `stream`); otherwise, or without one, the mapped APIError."""
        request = self.client.build_request(method, path, json=json,
                                            **({"timeout": timeout} if timeout is not None else {}))
        try:
            response = await self.client.send(request, stream=stream)
        except httpx.HTTPError as error:
            raise self.error(error) from error
        if response.status_code >= 400:
            if stream:
                await response.aread()
                await response.aclose()
            error = answer_error(self.name, response)
            # A client's refused request is the client's business; a failing or misconfigured upstream the operator's.
            passed = error.status == response.status_code < 500
            logger.log(logging.DEBUG if passed else logging.WARNING, "%s at %s answered %d to %s %s", self.name,
                       self.base_url, response.status_code, method, path)
            raise error
        return response

    async def health(self, paths: Iterable[str] = HEALTH_PATHS) -> tuple[bool, str]:
        return await probe(self.health_client, self.name, paths)


# ---- health -------------------------------------------------------------------------------------------------


def _verdict(service: str, base: str, response: httpx.Response, log: bool = True) -> tuple[bool, str]:
    if response.status_code == 200:
        return True, "ok"
    if log:
        logger.warning("health check of the %s at %s answered %d", service, base, response.status_code)
    message = str(_error_fields(response).get("message", ""))
    return False, f"its health check answered {response.status_code}" + (f": {message}" if message else "")


def _no_answer(service: str, base: str, error: httpx.HTTPError, log: bool = True) -> tuple[bool, str]:
    if log:
        logger.warning("health check of the %s at %s failed: %s", service, base, type(error).__name__)
    if isinstance(error, httpx.TimeoutException):
        return False, "it did not answer its health check in time"
    return False, f"unreachable ({type(error).__name__})"


async def probe(client: httpx.AsyncClient, service: str, paths: Iterable[str] = HEALTH_PATHS) -> tuple[bool, str]:
    """(healthy, reason) of the service at the client's base URL: the first of `paths` it serves answers 200.
    The reason leaves out the address (health is open to anyone); the log has it."""
    base = str(client.base_url)
    response = None
    try:
        for path in paths:
            response = await client.get(path)
            if response.status_code != 404:
                break
    except httpx.HTTPError as error:
        return _no_answer(service, base, error)
    assert response is not None, "no health paths given"
    return _verdict(service, base, response)


def probe_sync(base_url: str, service: str, paths: Iterable[str] = HEALTH_PATHS,
               timeout: float = 3.0) -> tuple[bool, str]:
    """`probe` without an event loop, for threads (the stack launcher's waits, which poll a starting service and
    report its failure themselves: nothing is logged)."""
    base = api_base(base_url)
    response = None
    try:
        with httpx.Client(base_url=base, timeout=timeout) as client:
            for path in paths:
                response = client.get(path)
                if response.status_code != 404:
                    break
    except httpx.HTTPError as error:
        return _no_answer(service, base, error, log=False)
    assert response is not None, "no health paths given"
    return _verdict(service, base, response, log=False)
