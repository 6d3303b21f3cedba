"""Routes of the gateway: ChatQnA and OpenAI chat, retrieval alone, the page, health; dataprep is dataprep.py's."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import FileResponse, Response

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.sse import STREAMING_RESPONSES, dumps, sse_response

from .dataprep import RagDep, check_index, dataprep_router
from .protocol import ChatCompletionRequest, ChatQnARequest, RetrieveRequest
from .rag import Question, RAGPipeline
from .rerank import DISABLED
from .store import Search
from .streams import StreamFormat

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
FORMAT_HELP = ("Stream format: 'openai' (the default: chat.completion.chunk events, sources in the last one) or "
               "'opea' (OPEA's `data: b'...'` lines, which OPEA's ChatQnA UIs parse).")
FormatQuery = Annotated[StreamFormat | None, Query(description=FORMAT_HELP)]
FormatHeader = Annotated[StreamFormat | None, Header(description=FORMAT_HELP + " The query parameter wins.")]


def question_of(body: ChatQnARequest, rag: RAGPipeline) -> Question:
    turns = body.turns()
    if turns[-1]["role"] != "user" or not turns[-1]["content"].strip():
        raise APIError(ErrorKind.INVALID_REQUEST, "The last message must be a non-empty user message.", "messages")
    settings = rag.settings
    check_index(settings, body.index_name, allow_all=False, status=ErrorKind.INVALID_REQUEST)
    if body.search_type == "similarity_distance_threshold" and body.distance_threshold is None:
        raise APIError(ErrorKind.INVALID_REQUEST, "search_type 'similarity_distance_threshold' needs "
                                                  "'distance_threshold'.", "distance_threshold")
    if body.chat_template is not None and "{question}" not in body.chat_template:
        raise APIError(ErrorKind.INVALID_REQUEST, "'chat_template' must contain {question} (and {context} for the "
                                                  "retrieved chunks).", "chat_template")
    llm = {
        "max_tokens": body.max_tokens or body.max_completion_tokens or settings.max_tokens,
        "temperature": settings.temperature if body.temperature is None else body.temperature,
        **body.sampling(),
    }
    return Question(
        messages=[t for t in turns if t["role"] in ("user", "assistant")],
        k=body.k or settings.top_k,
        top_n=body.top_n or settings.top_n,
        llm=llm,
        search=Search(body.search_type, body.fetch_k, body.lambda_mult, body.score_threshold,
                      2.0 if body.distance_threshold is None else body.distance_threshold),
        chat_template=body.chat_template,
    )


def gateway_router() -> APIRouter:
    router = APIRouter()
    router.include_router(health_router("chatqna_gateway", readiness))
    router.include_router(dataprep_router())

    async def chat(body: ChatQnARequest, rag: RAGPipeline, fmt: StreamFormat | None) -> Response:
        question = question_of(body, rag)
        model = body.model or rag.settings.pipeline_name
        if body.stream:
            return sse_response(await rag.open_stream(question, model, fmt or "openai"))
        return Response(dumps(await rag.answer(question, model)), media_type="application/json")

    @router.post("/v1/chatqna", responses=STREAMING_RESPONSES)
    async def chatqna(body: ChatQnARequest, rag: RagDep, stream_format: FormatQuery = None,
                      x_stream_format: FormatHeader = None) -> Response:
        return await chat(body, rag, stream_format or x_stream_format)

    @router.post("/v1/chat/completions", responses=STREAMING_RESPONSES)
    async def chat_completions(body: ChatCompletionRequest, rag: RagDep, stream_format: FormatQuery = None,
                               x_stream_format: FormatHeader = None) -> Response:
        return await chat(body, rag, stream_format or x_stream_format)

    @router.post("/v1/retrieve")
    async def retrieve(body: RetrieveRequest, rag: RagDep) -> dict:
        """The retrieval stage alone (embed, search and, with a reranker, rerank): the chunks a question would be
        answered from."""
        k, top_n = body.k or rag.settings.top_k, body.top_n or rag.settings.top_n
        return {"sources": await rag.retrieve(body.query, k, top_n)}

    @router.get("/v1/models")
    async def models(rag: RagDep) -> dict:
        pipeline = {"id": rag.settings.pipeline_name, "object": "model", "owned_by": "ovgenai"}
        return {"object": "list", "data": [pipeline]}

    @router.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return router


async def readiness(request: Request) -> Readiness:
    """Ready when the embedding service, the LLM, the vector store and (when configured) the reranker all are;
    both bodies list each one, and say when there is no reranker."""
    rag: RAGPipeline = request.app.state.rag
    upstreams = request.app.state.upstreams

    async def rerank() -> tuple[bool, str]:
        return await rag.reranker.check() if rag.reranker else (True, DISABLED)

    (embed_ok, embed), (llm_ok, llm), (store_ok, store), (rerank_ok, reranked) = await asyncio.gather(
        upstreams["embedding"].health(), upstreams["llm"].health(), rag.store.healthy(),
        rerank(),
    )
    checks = {
        "embedding": (embed_ok, "ok" if embed_ok else embed),
        "llm": (llm_ok, "ok" if llm_ok else llm),
        "vector_store": (store_ok, f"ok: {store}" if store_ok else store),
        "rerank": (rerank_ok, reranked),
    }
    status = {name: text for name, (_, text) in checks.items()}
    failing = "; ".join(f"{name}: {text}" for name, (ok, text) in checks.items() if not ok)
    return Readiness(not failing, failing, opea={"Dependencies": status}, health={"dependencies": status})
