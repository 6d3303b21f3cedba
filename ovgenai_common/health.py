"""The readiness routes every service has, made in one place: the open probes `/health` and OPEA's
`/v1/health_check`, and `/health/details` behind the API key.

The probes are open to anyone (orchestrators send no key: security.py), so they say only up or down: 200, or 503
with a fixed message (`/health` in OpenAI's error shape, OPEA's body exactly as its guide has it). What a service
knows of its parts (its models, the store's chunk count, each upstream's state, why it is not ready) is at
`/health/details`, which needs the key like every route but the probes. All three answer from one check
(`Readiness`), so they never disagree. A check asks each upstream's own health endpoint and never runs inference
(an embedding, a rerank): a probe must cost nothing that anyone could use to load a service. Liveness (`/live`) is
the app factory's: it needs no check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .errors import ErrorKind, error_body
from .opea import health_check_body
from .startup import RETRY_AFTER

DETAILS_PATH = "/health/details"
NOT_READY = f"Not ready: {DETAILS_PATH} says why (with the API key), and the log."
LOADING = "Loading model"  # llama.cpp's words for the same state


@dataclass
class Readiness:
    ready: bool
    reason: str = ""  # why not: at /health/details, never in an open probe
    loading: bool = False  # not ready yet because it loads (a model, a store): the probes say so, with Retry-After
    details: dict[str, Any] = field(default_factory=dict)  # the service's parts and their states: /health/details
    opea: dict[str, Any] = field(default_factory=dict)  # details under OPEA's key names ("Model"): /health/details


def health_router(
    service: Callable[[Request], str] | str,
    check: Callable[[Request], Awaitable[Readiness]],
    *,
    opea_version: bool = True,
) -> APIRouter:
    """`service` names the OPEA title (or reads it from the request's app); `opea_version=False` leaves out OPEA's
    Version key, as the body of OPEA's LLM guide does."""
    router = APIRouter()

    @router.get("/health")
    async def health(request: Request) -> Response:
        readiness = await check(request)
        if readiness.ready:
            return JSONResponse({"status": "ok"})
        if readiness.loading:
            return JSONResponse(error_body(LOADING, ErrorKind.UNAVAILABLE, code=503), status_code=503,
                                headers={"Retry-After": str(RETRY_AFTER)})
        return JSONResponse(error_body(NOT_READY, ErrorKind.UNAVAILABLE, code=503), status_code=503)

    @router.get("/v1/health_check")
    async def health_check(request: Request) -> Response:
        readiness = await check(request)
        name = service(request) if callable(service) else service
        return JSONResponse(health_check_body(name, version=opea_version),
                            status_code=200 if readiness.ready else 503)

    @router.get(DETAILS_PATH)
    async def details(request: Request) -> Response:
        """Readiness with what the service knows of its parts; behind the API key, as every route but the probes."""
        readiness = await check(request)
        status = {"status": "ok"} if readiness.ready else {"status": "unavailable", "reason": readiness.reason}
        return JSONResponse({**status, **readiness.opea, **readiness.details},
                            status_code=200 if readiness.ready else 503)

    return router
