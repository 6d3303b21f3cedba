"""Routes of the LLM microservice: HTTP only (bodies in, the backend's answers out)."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from ovgenai_common.body import loads
from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import STREAMING_RESPONSES

from .deps import BackendDep, MetricsDep, SettingsDep, get_backend, get_settings
from .metrics import ProxyMetrics
from .protocol import normalize_chat_body, normalize_completion_body
from .service import Backend

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def readiness(request: Request) -> Readiness:
    """Ready exactly when the backend's own health check is (any replica's); the probes answer OPEA's guide body
    either way, the details say the backend's state."""
    ok, reason = await get_backend(request).health()
    return Readiness(ok, reason, details={"backend": reason})


router = APIRouter()
router.include_router(
    health_router(lambda request: get_settings(request).service_name, readiness, opea_version=False)
)


@router.post("/v1/chat/completions", responses=STREAMING_RESPONSES)
async def chat_completions(request: Request, settings: SettingsDep, backend: BackendDep,
                           metrics: MetricsDep) -> Response:
    body = await json_body(request, settings.max_json_depth)
    path, body, stream = normalize_chat_body(body, settings.llm_model, request.headers.get("accept", ""),
                                             settings.max_json_bytes)
    return await relay(request, path, body, stream, backend, metrics)


@router.post("/v1/completions", responses=STREAMING_RESPONSES)
async def completions(request: Request, settings: SettingsDep, backend: BackendDep, metrics: MetricsDep) -> Response:
    body = normalize_completion_body(await json_body(request, settings.max_json_depth), settings.llm_model)
    return await relay(request, "/v1/completions", body, bool(body.get("stream")), backend, metrics)


@router.get("/v1/models")
async def models(backend: BackendDep) -> Response:
    response = await backend.request("GET", "/v1/models")
    return Response(response.content, status_code=response.status_code, media_type="application/json")


async def json_body(request: Request, max_depth: int) -> Any:
    """The body as JSON whatever its Content-Type (OPEA's clients do not always send one), within the same depth
    limit that the shared middleware applies to JSON-typed bodies."""
    return loads(await request.body(), max_depth)


async def relay(request: Request, path: str, body: dict, stream: bool, backend: Backend,
                metrics: ProxyMetrics) -> Response:
    started = time.perf_counter()
    if not stream:
        # A unary answer is awaited whole: if our client leaves meanwhile, the backend request is cancelled, which
        # closes its connection, and the backend aborts the generation (its own disconnect rule).
        response = await cancel_on_disconnect(request, backend.post(path, body))
        metrics.observe(path, time.perf_counter() - started)
        return Response(response.content, media_type="application/json")
    upstream = await backend.open_stream(path, body)
    metrics.observe(path, time.perf_counter() - started)
    return RelayedStream(backend, upstream)


class RelayedStream(StreamingResponse):
    """A backend's stream relayed to our client, its upstream released however the response ends. The relay's own
    `finally` is not enough: a client that disconnects before the first chunk is sent cancels the response before
    the relay starts, and a generator that never started never runs its `finally`; the backend would generate to
    the end for nobody, and the replica would count the stream as in flight for good."""

    def __init__(self, backend: Backend, upstream: httpx.Response):
        self._relay = backend.relay(upstream)
        self._release = partial(backend.release, upstream)
        super().__init__(self._relay, media_type="text/event-stream", headers=SSE_HEADERS)

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._relay.aclose()  # a relay left suspended mid-stream ends now, not when collected
            await self._release()
