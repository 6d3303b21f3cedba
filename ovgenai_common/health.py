"""The readiness routes every service has, made in one place: `/health` and OPEA's `/v1/health_check`.

Each service says only how ready it is (`Readiness`); both routes answer from that one check, so they can never
disagree: 200 when ready, otherwise 503 with the reason (`/health` in OpenAI's error shape, OPEA's body with the
service's details). Liveness (`/live`) is the app factory's: it needs no check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .errors import ErrorKind, error_body
from .opea import health_check_body


@dataclass
class Readiness:
    ready: bool
    reason: str = ""  # why not, for /health's 503
    opea: dict[str, Any] = field(default_factory=dict)  # keys OPEA's body carries after its own
    health: dict[str, Any] = field(default_factory=dict)  # keys /health's 200 body carries after "status"


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
            return JSONResponse({"status": "ok", **readiness.health})
        return JSONResponse(error_body(readiness.reason, ErrorKind.UNAVAILABLE, code=503), status_code=503)

    @router.get("/v1/health_check")
    async def health_check(request: Request) -> Response:
        readiness = await check(request)
        name = service(request) if callable(service) else service
        body = health_check_body(name, version=opea_version, **readiness.opea)
        return JSONResponse(body, status_code=200 if readiness.ready else 503)

    return router
