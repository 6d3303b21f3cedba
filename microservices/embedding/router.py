"""Routes of the embedding microservice: OpenAI, TEI and OPEA shapes over one service (HTTP only)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import dumps

from .deps import ServiceDep, loaded_service
from .protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest
from .service import encode_vector


def _json(payload: object, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(payload), media_type="application/json", headers=headers)


def _truncation_headers(truncated: int) -> dict[str, str]:
    return {"X-Inputs-Truncated": str(truncated)} if truncated else {}


def embedding_router() -> APIRouter:
    """Each answer is cancelled if its client leaves first, so that its texts not yet embedded leave the batch queue
    (batcher.py) instead of holding the model for nobody."""
    router = APIRouter()
    router.include_router(health_router("embedding_openvino", readiness))

    @router.post("/v1/embeddings")
    async def embeddings(body: EmbeddingRequest, request: Request, service: ServiceDep) -> Response:
        async def work() -> Response:
            service.check_options(body)
            texts = await service.texts_of(body.input)
            result = await service.embed(texts)
            data = [
                {"object": "embedding", "index": i, "embedding": encode_vector(v, body.encoding_format)}
                for i, v in enumerate(result.vectors)
            ]
            return _json({
                "object": "list",
                "data": data,
                "model": body.model or service.name,
                "usage": {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens},
            }, _truncation_headers(result.truncated))

        return await cancel_on_disconnect(request, work())

    @router.post("/embed")
    async def tei_embed(body: TEIEmbedRequest, request: Request, service: ServiceDep) -> Response:
        async def work() -> Response:
            texts = await service.texts_of(body.inputs, "inputs")
            result = await service.embed(texts, truncate=body.truncate, normalize=body.normalize, field="inputs")
            vectors = [encode_vector(v, "float") for v in result.vectors]
            return _json(vectors, _truncation_headers(result.truncated))

        return await cancel_on_disconnect(request, work())

    @router.post("/v1/rerank")
    async def rerank(body: RerankRequest, request: Request, service: ServiceDep) -> Response:
        async def work() -> Response:
            with_text = body.return_documents
            return _json({"model": body.model or "reranker", "results": [
                {"index": index, "relevance_score": score, **({"document": {"text": text}} if with_text else {})}
                for index, score, text in await service.ranked(body)
            ]})

        return await cancel_on_disconnect(request, work())

    @router.post("/rerank")
    async def tei_rerank(body: RerankRequest, request: Request, service: ServiceDep) -> Response:
        async def work() -> Response:
            with_text = body.return_text or body.return_documents
            return _json([
                {"index": index, "score": score, **({"text": text} if with_text else {})}
                for index, score, text in await service.ranked(body)
            ])

        return await cancel_on_disconnect(request, work())

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
