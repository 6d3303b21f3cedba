"""HTTP routes: maps requests to `Serving` and results to responses. Served under /v1 and, as OVMS does, /v3."""

from __future__ import annotations

import asyncio
from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.protocol import ChatCompletionRequest, CompletionRequest
from ovgenai_common.sse import STREAMING_RESPONSES, dumps, sse_response

from .engine.types import Engine
from .protocol import DetokenizeRequest, TokenizeRequest
from .serving import Serving
from .tokenization import detokenize, tokenize


def get_serving(request: Request) -> Serving:
    return request.app.state.serving


ServingDep = Annotated[Serving, Depends(get_serving)]


def _json(payload: dict) -> Response:
    return Response(dumps(payload), media_type="application/json")


def openai_router() -> APIRouter:
    router = APIRouter()

    @router.post("/chat/completions", responses=STREAMING_RESPONSES)
    async def chat_completions(body: ChatCompletionRequest, request: Request, serving: ServingDep) -> Response:
        prep = await serving.prepare_chat(body)
        if body.stream:
            return sse_response(serving.chat_stream(body, prep))
        return _json(await cancel_on_disconnect(request, serving.chat(body, prep)))

    @router.post("/completions", responses=STREAMING_RESPONSES)
    async def completions(body: CompletionRequest, request: Request, serving: ServingDep) -> Response:
        preps = await serving.prepare_completion(body)
        if body.stream:
            if len(preps) > 1:
                raise APIError(ErrorKind.INVALID_REQUEST, "Streaming accepts a single prompt.", "prompt")
            return sse_response(serving.completion_stream(body, preps[0]))
        return _json(await cancel_on_disconnect(request, serving.completion(body, preps)))

    @router.get("/models")
    async def models(serving: ServingDep) -> dict:
        created = int(serving.started_at)
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "ovgenai", "root": name,
                 "max_model_len": engine.max_context, "input_modalities": _modalities(engine)}
                for name, engine in serving.engines.items()
            ],
        }

    @router.get("/models/{model:path}")
    async def model(model: str, serving: ServingDep) -> dict:
        engine = serving.engine_for(model)
        return {"id": engine.name, "object": "model", "created": int(serving.started_at), "owned_by": "ovgenai",
                "input_modalities": _modalities(engine)}

    return router


def _modalities(engine: Engine) -> list[str]:
    """What a model reads (as OpenRouter's model list says it): images for a vision-language model."""
    return ["text", "image"] if engine.vision else ["text"]


async def readiness(request: Request) -> Readiness:
    """Ready when every served model is; OPEA's body lists each model's state."""
    states = {name: engine.health() for name, engine in get_serving(request).engines.items()}
    unhealthy = {name: h for name, h in states.items() if not h.ready}
    reason = "; ".join(f"{name}: {h.message or h.state.value}" for name, h in unhealthy.items())
    return Readiness(not unhealthy, reason, opea={"Models": {n: h.state.value for n, h in states.items()}})


def service_router() -> APIRouter:
    router = APIRouter()
    router.include_router(health_router("llm_openvino", readiness))

    # KServe's health routes, as OVMS answers them (status only: 200, or 503 until every model is ready).
    @router.get("/v2/health/live", include_in_schema=False)
    async def kserve_live() -> Response:
        return Response(status_code=200)

    @router.get("/v2/health/ready", include_in_schema=False)
    async def kserve_ready(request: Request) -> Response:
        return Response(status_code=200 if (await readiness(request)).ready else 503)

    # vLLM's tokenizer routes, where vLLM serves them (beside /v1, not under it). Tokenizing runs on a worker
    # thread: a long prompt must not stall the streams on the event loop.
    @router.post("/tokenize")
    async def tokenize_route(body: TokenizeRequest, serving: ServingDep) -> Response:
        return _json(await asyncio.to_thread(tokenize, serving.engines, body))

    @router.post("/detokenize")
    async def detokenize_route(body: DetokenizeRequest, serving: ServingDep) -> Response:
        return _json(await asyncio.to_thread(detokenize, serving.engines, body))

    @router.get("/v1/config")
    async def config(serving: ServingDep) -> dict:
        """OVMS-style model status."""
        out = {}
        for name, engine in serving.engines.items():
            health = engine.health()
            out[name] = {
                "model_version_status": [
                    {
                        "version": "1",
                        "state": health.state.value,
                        "status": {"error_code": "OK" if health.ready else "UNAVAILABLE",
                                   "error_message": health.message or "OK"},
                    }
                ],
            }
            if engine.tuning is not None:  # what autotune chose on this CPU (engine/autotune.py)
                out[name]["autotune"] = msgspec.to_builtins(engine.tuning)
        return out

    return router

