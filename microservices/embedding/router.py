"""Routes of the embedding microservice: OpenAI, TEI and OPEA shapes over one service (HTTP only)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import dumps

from .deps import ServiceDep, loaded_service
from .protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest
from .service import encode_vector


def _truncation_headers(truncated: int) -> dict[str, str]:
    return {"X-Inputs-Truncated": str(truncated)} if truncated else {}


def embedding_router() -> APIRouter:
    router = APIRouter()
    router.include_router(health_router("embedding_openvino", readiness))

    @router.post("/v1/embeddings")
    async def embeddings(body: EmbeddingRequest, service: ServiceDep) -> Response:
        service.check_options(body)
        texts = await service.texts_of(body.input)
        result = await service.embed(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": encode_vector(v, body.encoding_format)}
            for i, v in enumerate(result.vectors)
        ]
        payload = {
            "object": "list",
            "data": data,
            "model": body.model or service.name,
            "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
        }
        return Response(dumps(payload), media_type="application/json", headers=_truncation_headers(result.truncated))

    @router.post("/embed")
    async def tei_embed(body: TEIEmbedRequest, service: ServiceDep) -> Response:
        texts = await service.texts_of(body.inputs)
        result = await service.embed(texts, truncate=body.truncate, normalize=body.normalize)
        vectors = [encode_vector(v, "float") for v in result.vectors]
        return Response(dumps(vectors), media_type="application/json", headers=_truncation_headers(result.truncated))

    @router.post("/v1/rerank")
    async def rerank(body: RerankRequest, service: ServiceDep) -> dict:
        with_text = body.return_documents
        results = [
            {"index": index, "relevance_score": score, **({"document": {"text": text}} if with_text else {})}
            for index, score, text in await service.ranked(body)
        ]
        return {"model": body.model or "reranker", "results": results}

    @router.post("/rerank")
    async def tei_rerank(body: RerankRequest, service: ServiceDep) -> list:
        with_text = body.return_text or body.return_documents
        return [
            {"index": index, "score": score, **({"text": text} if with_text else {})}
            for index, score, text in await service.ranked(body)
        ]

    @router.get("/v1/models")
    async def models(service: ServiceDep) -> dict:
        return {"object": "list", "data": [{"id": service.name, "object": "model", "owned_by": "ovgenai"}]}

    return router


async def readiness(request: Request) -> Readiness:
    """Ready once the model is loaded and its batching worker runs; OPEA's body names the model (or why not)."""
    service = loaded_service(request)
    if service is None:
        reason = "loading"
    elif not service.batcher.alive:
        reason = "the batching worker stopped"
    else:
        return Readiness(True, opea={"Model": service.name})
    return Readiness(False, reason, opea={"Model": reason})
