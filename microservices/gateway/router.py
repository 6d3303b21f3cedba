"""Routes of the gateway: OPEA dataprep names for ingestion, ChatQnA and OpenAI chat, the page, health."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import httpx
import openai
from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse, Response
from langchain_core.documents import Document

from microservices.common.errors import APIError, ErrorKind, error_body
from microservices.common.opea import health_check_body
from microservices.common.sse import STREAMING_RESPONSES, dumps, sse_response

from . import documents
from .protocol import ChatCompletionRequest, ChatQnARequest, DeleteRequest, RetrieveRequest
from .rag import Question, RAGPipeline, upstream_error
from .store import DocumentStore

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"


def get_rag(request: Request) -> RAGPipeline:
    return request.app.state.rag


RagDep = Annotated[RAGPipeline, Depends(get_rag)]


async def _chunks(path: Path, kind: str, settings, name: str) -> AsyncIterator[Document]:
    """Pages are read one at a time in a worker thread and split as they come."""
    pages = documents.load_pages(path, kind)
    split = documents.splitter(settings.chunk_size, settings.chunk_overlap, kind)
    while True:
        page = await asyncio.to_thread(next, pages, None)
        if page is None:
            return
        page.metadata["source"] = name
        for chunk in split.split_documents([page]):
            if chunk.page_content.strip():
                yield chunk


async def _spool(upload: UploadFile, folder: Path, limit: int) -> Path:
    """Copy an upload to a file whose name the server chooses, enforcing the size limit while copying."""
    suffix = Path(documents.safe_name(upload.filename)).suffix.lower()
    handle = tempfile.NamedTemporaryFile(dir=folder, suffix=suffix, delete=False)
    size = 0
    with handle:
        while block := await upload.read(1 << 20):
            size += len(block)
            if size > limit:
                handle.close()
                Path(handle.name).unlink(missing_ok=True)
                raise APIError(ErrorKind.PAYLOAD_TOO_LARGE,
                               f"'{upload.filename}' exceeds the upload limit of {limit} bytes.", "files")
            handle.write(block)
    if size == 0:
        Path(handle.name).unlink(missing_ok=True)
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{upload.filename}' is empty.", "files")
    return Path(handle.name)


async def _ingest_one(store: DocumentStore, settings, name: str, path: Path, kind: str):
    try:
        return await store.ingest(name, documents.file_hash(path), _chunks(path, kind, settings, name))
    except (openai.APIError, httpx.HTTPError) as error:
        raise upstream_error(error, "embedding service") from error


def gateway_router() -> APIRouter:
    router = APIRouter()

    @router.post("/v1/dataprep/ingest")
    async def ingest(
        request: Request,
        files: Annotated[list[UploadFile] | None, File()] = None,
        text: Annotated[list[str] | None, Form()] = None,
        name: Annotated[list[str] | None, Form()] = None,
    ) -> dict:
        rag: RAGPipeline = request.app.state.rag
        settings = rag.settings
        if not files and not text:
            raise APIError(ErrorKind.INVALID_REQUEST, "Send 'files' (multipart) and/or 'text' fields.", "files")
        uploads = [(documents.safe_name(f.filename), f) for f in files or []]
        for upload_name, _ in uploads:
            documents.kind_of(upload_name)  # refuse unsupported types before reading anything
        workdir = Path(settings.data_dir) / "uploads"
        workdir.mkdir(parents=True, exist_ok=True)
        results = []
        tmp = Path(tempfile.mkdtemp(dir=workdir))
        try:
            for upload_name, upload in uploads:
                path = await _spool(upload, tmp, settings.max_upload_bytes)
                kind = documents.kind_of(upload_name)
                results.append(await _ingest_one(rag.store, settings, upload_name, path, kind))
            for index, body in enumerate(text or []):
                if not body.strip():
                    raise APIError(ErrorKind.INVALID_REQUEST, f"Text field {index} is empty.", "text")
                given = (name or [])[index] if index < len(name or []) else None
                text_name = documents.safe_name(given or f"text-{documents.text_hash(body)[:12]}.txt")
                path = tmp / f"text-{index}.txt"
                path.write_text(body, encoding="utf-8")
                results.append(await _ingest_one(rag.store, settings, text_name, path, "text"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
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

    @router.get("/v1/health_check")
    async def health_check(request: Request) -> Response:
        status, ok = await _dependencies(request)
        return JSONResponse(health_check_body("chatqna_gateway", Dependencies=status), status_code=200 if ok else 503)

    @router.get("/health")
    async def health(request: Request) -> Response:
        status, ok = await _dependencies(request)
        if ok:
            return JSONResponse({"status": "ok", "dependencies": status})
        failing = "; ".join(f"{k}: {v}" for k, v in status.items() if not v.startswith("ok"))
        return JSONResponse(error_body(failing, ErrorKind.UNAVAILABLE, code=503), status_code=503)

    @router.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return router


async def _dependencies(request: Request) -> tuple[dict[str, str], bool]:
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
    return status, embed_ok and llm_ok and store_ok
