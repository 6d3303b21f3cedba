"""Routes of the embedding microservice: OpenAI, TEI and OPEA shapes over one service (HTTP only). Each answer is
cancelled if its client leaves first, so that its texts not yet embedded leave the batch queue (batcher.py)
instead of holding the model for nobody."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import dumps

from .deps import ServiceDep, loaded_service
from .protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest


async def readiness(request: Request) -> Readiness:
    """Ready once the model is loaded, its batching worker runs and its process is up; OPEA's body names the model
    (or why not)."""
    service = loaded_service(request)
    if service is None:
        reason = "loading"
    elif not service.batcher.alive:
        reason = "the batching worker stopped"
    elif not service.model.alive:
        reason = "the model process stopped; it is starting again"
    else:
        return Readiness(True, opea={"Model": service.name})
    return Readiness(False, reason, opea={"Model": reason})


router = APIRouter()
router.include_router(health_router("embedding_openvino", readiness))


@router.post("/v1/embeddings")
async def embeddings(body: EmbeddingRequest, request: Request, service: ServiceDep) -> Response:
    answer, truncated = await cancel_on_disconnect(request, service.openai_embeddings(body))
    return _json(answer, truncated)


@router.post("/embed")
async def tei_embed(body: TEIEmbedRequest, request: Request, service: ServiceDep) -> Response:
    vectors, truncated = await cancel_on_disconnect(request, service.tei_embeddings(body))
    return _json(vectors, truncated)


@router.post("/v1/rerank")
async def rerank(body: RerankRequest, request: Request, service: ServiceDep) -> Response:
    return _json(await cancel_on_disconnect(request, service.rerank_results(body)))


@router.post("/rerank")
async def tei_rerank(body: RerankRequest, request: Request, service: ServiceDep) -> Response:
    return _json(await cancel_on_disconnect(request, service.tei_rerank_results(body)))


@router.get("/v1/models")
async def models(service: ServiceDep) -> dict:
    # The prompts (by name) this service puts before texts: what a client that keeps vectors records beside them.
    prompts = service.rules.prompts
    return {"object": "list", "data": [{"id": service.name, "object": "model", "owned_by": "ovgenai",
                                        "prompts": prompts.texts, "default_prompt_name": prompts.default_name}]}


def _json(payload: object, truncated: int = 0) -> Response:
    """The answer, saying how many inputs were cut to the model's length (none: no header)."""
    headers = {"X-Inputs-Truncated": str(truncated)} if truncated else None
    return Response(dumps(payload), media_type="application/json", headers=headers)
