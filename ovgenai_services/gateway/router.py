"""Routes of the gateway (HTTP only): ChatQnA and OpenAI chat, retrieval alone, the page, health; dataprep is
dataprep.py's. A request's checks are validation.py's, the answering rag.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import FileResponse, Response

from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.health import Readiness, health_router
from ovgenai_common.responses_protocol import ResponsesRequest
from ovgenai_common.sse import STREAMING_RESPONSES, dumps, sse_response

from . import responses
from .deps import ClientDep, IndicesDep, RagDep, ResponsesDep, SettingsDep, get_rag, get_upstreams
from .protocol import ChatQnARequest, OpenAIChatRequest, RetrieveRequest
from .rag import RAGPipeline
from .rerank import DISABLED
from .settings import GatewaySettings
from .streams import StreamFormat
from .validation import Defaults, question_of, retrieval_query

STATIC = Path(__file__).parent / "static"
FORMAT_HELP = ("Stream format: 'openai' (the default: chat.completion.chunk events, sources in the last one) or "
               "'opea' (OPEA's `data: b'...'` lines, which OPEA's ChatQnA UIs parse).")
FormatQuery = Annotated[StreamFormat | None, Query(description=FORMAT_HELP)]
FormatHeader = Annotated[StreamFormat | None, Header(description=FORMAT_HELP + " The query parameter wins.")]


async def readiness(request: Request) -> Readiness:
    """Ready when the embedding service, the LLM, the vector store and (when configured) the reranker all are, each
    by its own health check (never an embedding or a rerank: anyone may probe). The details list each one, the
    store's chunk count, and say when there is no reranker."""
    rag, upstreams = get_rag(request), get_upstreams(request)

    async def rerank() -> tuple[bool, str]:
        return await upstreams["rerank"].health() if "rerank" in upstreams else (True, DISABLED)

    (embed_ok, embed), (llm_ok, llm), (store_ok, store), (rerank_ok, reranked) = await asyncio.gather(
        upstreams["embedding"].health(), upstreams["llm"].health(), rag.store.healthy(), rerank(),
    )
    checks = {
        "embedding": (embed_ok, embed),
        "llm": (llm_ok, llm),
        "vector_store": (store_ok, f"ok: {store}" if store_ok else store),
        "rerank": (rerank_ok, reranked),
    }
    status = {name: text for name, (_, text) in checks.items()}
    failing = "; ".join(f"{name}: {text}" for name, (ok, text) in checks.items() if not ok)
    return Readiness(not failing, failing, details={"dependencies": status})


router = APIRouter()
router.include_router(health_router("chatqna_gateway", readiness))


@router.post("/v1/chatqna", responses=STREAMING_RESPONSES)
async def chatqna(request: Request, body: ChatQnARequest, settings: SettingsDep, rag: RagDep, indices: IndicesDep,
                  stream_format: FormatQuery = None, x_stream_format: FormatHeader = None) -> Response:
    # OPEA's UIs send the question as a string and parse the megaservice's `data: b'...'` stream; a list of
    # messages is OpenAI's shape. A format asked for wins.
    shaped = "opea" if isinstance(body.messages, str) else None
    return await chat(request, body, settings, rag.on(await indices.get(body.index_name)),
                      stream_format or x_stream_format or shaped)


@router.post("/v1/chat/completions", responses=STREAMING_RESPONSES)
async def chat_completions(request: Request, body: OpenAIChatRequest, settings: SettingsDep, rag: RagDep,
                           indices: IndicesDep, stream_format: FormatQuery = None,
                           x_stream_format: FormatHeader = None) -> Response:
    return await chat(request, body, settings, rag.on(await indices.get(body.index_name)),
                      stream_format or x_stream_format)


@router.post("/v1/responses", responses=STREAMING_RESPONSES)
async def create_response(request: Request, body: ResponsesRequest, settings: SettingsDep, rag: RagDep,
                          store: ResponsesDep, client: ClientDep) -> Response:
    """OpenAI's Responses API, answered from the documents with their citations (responses.py)."""
    earlier = store.history(body.previous_response_id)
    chat_body = responses.chat_request(body, earlier)
    question = question_of(chat_body, _defaults(settings))
    conversation = [m for m in chat_body.turns() if m["role"] in ("user", "assistant")]
    responder = responses.Responder(rag, store, client, body, question, conversation,
                                    body.model or settings.pipeline_name)
    if body.stream:
        return sse_response(await responder.stream())
    return Response(dumps(await cancel_on_disconnect(request, responder.answer())), media_type="application/json")


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, store: ResponsesDep) -> Response:
    return Response(dumps(store.response(response_id)), media_type="application/json")


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, store: ResponsesDep) -> dict:
    return store.deleted(response_id)


@router.post("/v1/retrieve")
async def retrieve(request: Request, body: RetrieveRequest, settings: SettingsDep, rag: RagDep,
                   indices: IndicesDep) -> dict:
    """The retrieval stage alone (embed, search and, with a reranker, rerank): the chunks a question would be
    answered from."""
    k, top_n = body.k or settings.top_k, body.top_n or settings.top_n
    rag = rag.on(await indices.get(body.index_name))
    return {"sources": await cancel_on_disconnect(request, rag.retrieve(retrieval_query(body), k, top_n))}


@router.get("/v1/models")
async def models(settings: SettingsDep) -> dict:
    pipeline = {"id": settings.pipeline_name, "object": "model", "owned_by": "ovgenai"}
    return {"object": "list", "data": [pipeline]}


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


async def chat(request: Request, body: ChatQnARequest, settings: GatewaySettings, rag: RAGPipeline,
               fmt: StreamFormat | None) -> Response:
    """Both chat routes: the answer streamed as `fmt` says, or whole."""
    question = question_of(body, _defaults(settings))
    model = body.model or settings.pipeline_name
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        return sse_response(await rag.open_stream(question, model, fmt or "openai", include_usage=usage))
    # A client that leaves takes its answer's generation with it, as a stream's does.
    answer = await cancel_on_disconnect(request, rag.answer(question, model))
    return Response(dumps(answer), media_type="application/json")


def _defaults(settings: GatewaySettings) -> Defaults:
    return Defaults(settings.top_k, settings.top_n, settings.max_tokens, settings.temperature)
