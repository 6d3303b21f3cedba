"""Routes of the gateway: OPEA dataprep names for ingestion, ChatQnA and OpenAI chat, the page, health."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, Response

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import STREAMING_RESPONSES, dumps, sse_response

from . import documents
from .protocol import ChatCompletionRequest, ChatQnARequest, DeleteRequest, RetrieveRequest
from .rag import Question, RAGPipeline
from .service import Ingestion, text_fields

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"


def get_rag(request: Request) -> RAGPipeline:
    return request.app.state.rag


RagDep = Annotated[RAGPipeline, Depends(get_rag)]


def gateway_router() -> APIRouter:
    router = APIRouter()
    router.include_router(health_router("chatqna_gateway", readiness))

    @router.post("/v1/dataprep/ingest")
    async def ingest(
        request: Request,
        files: Annotated[list[UploadFile] | None, File()] = None,
        text: Annotated[list[str] | None, Form()] = None,
        name: Annotated[list[str] | None, Form()] = None,
    ) -> dict:
        rag: RAGPipeline = request.app.state.rag
        if not files and not text:
            raise APIError(ErrorKind.INVALID_REQUEST, "Send 'files' (multipart) and/or 'text' fields.", "files")
        results = await Ingestion(rag.store, rag.settings).ingest(files or [], text_fields(text or [], name or []))
        return {
            "status": 200,
            "message": "Data preparation succeeded",
            "documents": [{"name": r.name, "chunks": r.chunks, "status": r.status} for r in results],
            "total_chunks": sum(r.chunks for r in results),
        }

    @router.get("/v1/dataprep/get")
    @router.post("/v1/dataprep/get", operation_id="list_documents_post")  # OPEA's clients POST
    async def list_documents(rag: RagDep) -> list:
        return await rag.store.documents()

    @router.post("/v1/dataprep/delete")
    async def delete(body: DeleteRequest, rag: RagDep) -> dict:
        target = None if body.file_path == "all" else documents.safe_name(body.file_path)
        removed = await rag.store.delete(target)
        if target and not removed:
            raise APIError(ErrorKind.NOT_FOUND, f"No document named '{target}'.", "file_path")
        return {"status": True, "deleted_chunks": removed}

    async def chat(body: ChatQnARequest, rag: RAGPipeline) -> Response:
        turns = body.turns()
        if turns[-1]["role"] != "user" or not turns[-1]["content"].strip():
            raise APIError(ErrorKind.INVALID_REQUEST, "The last message must be a non-empty user message.", "messages")
        settings = rag.settings
        question = Question(
            messages=[t for t in turns if t["role"] in ("user", "assistant")],
            max_tokens=body.max_tokens or settings.max_tokens,
            temperature=settings.temperature if body.temperature is None else body.temperature,
            top_k=body.k or body.top_k or settings.top_k,
        )
        model = body.model or settings.pipeline_name
        if body.stream:
            return sse_response(await rag.open_stream(question, model))
        return Response(dumps(await rag.answer(question, model)), media_type="application/json")

    @router.post("/v1/chatqna", responses=STREAMING_RESPONSES)
    async def chatqna(body: ChatQnARequest, rag: RagDep) -> Response:
        return await chat(body, rag)

    @router.post("/v1/chat/completions", responses=STREAMING_RESPONSES)
    async def chat_completions(body: ChatCompletionRequest, rag: RagDep) -> Response:
        return await chat(body, rag)

    @router.post("/v1/retrieve")
    async def retrieve(body: RetrieveRequest, rag: RagDep) -> dict:
        """The retrieval step alone: the chunks a question would be answered from."""
        return {"sources": await rag.retrieve(body.query, body.k or rag.settings.top_k)}

    @router.get("/v1/models")
    async def models(rag: RagDep) -> dict:
        pipeline = {"id": rag.settings.pipeline_name, "object": "model", "owned_by": "ovgenai"}
        return {"object": "list", "data": [pipeline]}

    @router.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return router


async def readiness(request: Request) -> Readiness:
    """Ready when the embedding service, the LLM and the vector store all are; both bodies list each one."""
    rag: RAGPipeline = request.app.state.rag
    probes = request.app.state.probes
    (embed_ok, embed), (llm_ok, llm), (store_ok, store) = await asyncio.gather(
        probes.check(rag.settings.embedding_endpoint), probes.check(rag.settings.llm_endpoint), rag.store.healthy()
    )
    status = {
        "embedding": "ok" if embed_ok else embed,
        "llm": "ok" if llm_ok else llm,
        "vector_store": f"ok: {store}" if store_ok else store,
    }
    failing = "; ".join(f"{k}: {v}" for k, v in status.items() if not v.startswith("ok"))
    return Readiness(embed_ok and llm_ok and store_ok, failing, opea={"Dependencies": status},
                     health={"dependencies": status})
