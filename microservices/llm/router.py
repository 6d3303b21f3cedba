"""Routes of the LLM microservice."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from ovgenai_common.body import loads
from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import STREAMING_RESPONSES

from .protocol import normalize_chat_body
from .service import Backend

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def get_backend(request: Request) -> Backend:
    return request.app.state.backend


BackendDep = Annotated[Backend, Depends(get_backend)]


async def _json_body(request: Request) -> Any:
    """The body as JSON whatever its Content-Type (OPEA's clients do not always send one), within the same depth
    limit that the shared middleware applies to JSON-typed bodies."""
    return loads(await request.body(), request.app.state.settings.max_json_depth)


async def readiness(request: Request) -> Readiness:
    """Ready exactly when the backend's own health check is: OPEA's guide body when it is, plus the reason when not."""
    ok, reason = await get_backend(request).health()
    return Readiness(ok, reason, opea={} if ok else {"Backend": reason})


def llm_router() -> APIRouter:
    router = APIRouter()
    router.include_router(
        health_router(lambda request: request.app.state.settings.service_name, readiness, opea_version=False)
    )

    async def relay(path: str, body: dict, stream: bool, request: Request, backend: Backend) -> Response:
        metrics = request.app.state.metrics
        started = time.perf_counter()
        if not stream:
            response = await backend.post(path, body)
            metrics.observe(path, time.perf_counter() - started)
            return Response(response.content, media_type="application/json")
        upstream = await backend.open_stream(path, body)
        metrics.observe(path, time.perf_counter() - started)
        return StreamingResponse(backend.relay(upstream), media_type="text/event-stream", headers=SSE_HEADERS)

    @router.post("/v1/chat/completions", responses=STREAMING_RESPONSES)
    async def chat_completions(request: Request, backend: BackendDep) -> Response:
        path, body, stream = normalize_chat_body(
            await _json_body(request), request.app.state.settings.llm_model, request.headers.get("accept", "")
        )
        return await relay(path, body, stream, request, backend)

    @router.post("/v1/completions", responses=STREAMING_RESPONSES)
    async def completions(request: Request, backend: BackendDep) -> Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise APIError(ErrorKind.INVALID_REQUEST, "The request body must be a JSON object.")
        body.setdefault("model", request.app.state.settings.llm_model)
        return await relay("/v1/completions", body, bool(body.get("stream")), request, backend)

    @router.get("/v1/models")
    async def models(backend: BackendDep) -> Response:
        try:
            response = await backend.client.get("/v1/models")
        except Exception as error:
            raise APIError(ErrorKind.UNAVAILABLE, f"The backend is unreachable ({type(error).__name__}).") from error
        return Response(response.content, status_code=response.status_code, media_type="application/json")

    return router
