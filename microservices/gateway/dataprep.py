"""OPEA's dataprep routes: ingest (files, link_list, text; chunk_size and chunk_overlap per request), get, delete,
indices.

The gateway keeps one index, its Chroma collection (COLLECTION_NAME): OPEA's `index_name` may name it, and naming
another is an error (ingest, delete) or lists nothing (get), as OPEA's own service answers for an unknown index.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile

from ovgenai_common.body import depth_error, too_deep
from ovgenai_common.errors import APIError, ErrorKind

from . import documents
from .ingest_pool import IngestPool, IngestRoute
from .links import LinkFetcher, parse_link_list
from .protocol import DeleteRequest, DeleteResponse, DocumentEntry, GetRequest, IngestResponse
from .rag import RAGPipeline
from .service import Chunking, Ingestion, text_fields
from .settings import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, GatewaySettings
from .store import DocumentStore

# A link's document is named by its URL; OPEA names it `<url>.txt`, and its clients may delete it by that name.
OPEA_LINK_SUFFIX = ".txt"


def get_rag(request: Request) -> RAGPipeline:
    return request.app.state.rag


RagDep = Annotated[RAGPipeline, Depends(get_rag)]


def chunking(settings: GatewaySettings, size: int | None, overlap: int | None) -> Chunking:
    size = size or settings.chunk_size
    if overlap is None:
        overlap = min(settings.chunk_overlap, size // 2)
    elif overlap >= size:
        raise APIError(ErrorKind.INVALID_REQUEST,
                       f"'chunk_overlap' ({overlap}) must be smaller than the chunk size ({size}).", "chunk_overlap")
    return Chunking(size, overlap)


def check_index(settings: GatewaySettings, index_name: str | None, *, allow_all: bool, status: ErrorKind) -> None:
    if index_name is None or index_name == settings.collection or (allow_all and index_name == "all"):
        return
    raise APIError(status, f"No index named '{index_name}': this gateway keeps its documents in one index, "
                           f"'{settings.collection}' (COLLECTION_NAME).", "index_name")


async def document_named(store: DocumentStore, file_path: str) -> str | None:
    """The stored document a client's file_path names: its id, OPEA's `<url>.txt` for a link, or a file's path."""
    candidates = [file_path]
    if file_path.endswith(OPEA_LINK_SUFFIX) and file_path.startswith(("http://", "https://")):
        candidates.append(file_path.removesuffix(OPEA_LINK_SUFFIX))
    if not file_path.startswith(("http://", "https://")):
        try:
            candidates.append(documents.safe_name(file_path))
        except APIError:
            pass
    for name in candidates:
        if await store.has(name):
            return name
    return None


def dataprep_router() -> APIRouter:
    router = APIRouter()
    # Admitted by the ingest pool (a slot, a place in the queue, or a 429) before the upload is read.
    admitted = APIRouter(route_class=IngestRoute)

    @admitted.post("/v1/dataprep/ingest", response_model=IngestResponse)
    async def ingest(
        rag: RagDep,
        request: Request,
        files: Annotated[list[UploadFile] | None, File(description="Documents: .txt, .md, .html, .pdf.")] = None,
        link_list: Annotated[str | None, Form(
            description='A JSON array of http(s) URLs, e.g. \'["https://example.com/page"]\': HTML, PDF or text.'
        )] = None,
        text: Annotated[list[str] | None, Form(description="Texts to ingest as documents.")] = None,
        name: Annotated[list[str] | None, Form(description="The name of each text, in order.")] = None,
        chunk_size: Annotated[int | None, Form(ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE,
                                               description="Characters per chunk (default CHUNK_SIZE).")] = None,
        chunk_overlap: Annotated[int | None, Form(
            ge=0, lt=MAX_CHUNK_SIZE,
            description="Characters neighbouring chunks share, less than chunk_size (default CHUNK_OVERLAP, at most "
                        "half of chunk_size).")] = None,
        index_name: Annotated[str | None, Form(description="The index; this gateway keeps one.")] = None,
        process_table: Annotated[bool, Form(
            description="Accepted for OPEA's clients: a PDF's tables are read as its page text.")] = False,
        table_strategy: Annotated[Literal["fast", "hq", "llm"], Form(
            description="Accepted for OPEA's clients: a PDF's tables are read as its page text.")] = "fast",
    ) -> dict:
        del process_table, table_strategy  # accepted only: see their descriptions
        settings = rag.settings
        check_index(settings, index_name, allow_all=False, status=ErrorKind.INVALID_REQUEST)
        if link_list and too_deep(link_list.encode(), settings.max_json_depth):  # a form field: no middleware saw it
            raise depth_error(settings.max_json_depth, "link_list")
        links = parse_link_list(link_list, settings.max_links)
        if not files and not text and not links:
            raise APIError(ErrorKind.INVALID_REQUEST, "Send 'files' (multipart), 'link_list' and/or 'text' fields.",
                           "files")
        fetcher: LinkFetcher = request.app.state.links
        pool: IngestPool = request.app.state.ingest_pool
        results = await Ingestion(rag.store, settings, fetcher, pool).ingest(
            files or [], links, text_fields(text or [], name or []), chunking(settings, chunk_size, chunk_overlap)
        )
        return {
            "status": 200,
            "message": "Data preparation succeeded",
            "documents": [{"name": r.name, "chunks": r.chunks, "status": r.status} for r in results],
            "total_chunks": sum(r.chunks for r in results),
        }

    router.include_router(admitted)

    @router.get("/v1/dataprep/get", response_model=list[DocumentEntry])
    async def list_documents(rag: RagDep) -> list:
        return await rag.store.documents()

    @router.post("/v1/dataprep/get", response_model=list[DocumentEntry])
    async def list_documents_post(rag: RagDep, body: GetRequest | None = None) -> list:
        """OPEA's clients POST, with or without a body."""
        index_name = body.index_name if body else None
        if index_name not in (None, "all", rag.settings.collection):
            return []
        return await rag.store.documents()

    @router.post("/v1/dataprep/delete", response_model=DeleteResponse)
    async def delete(body: DeleteRequest, rag: RagDep) -> dict:
        check_index(rag.settings, body.index_name, allow_all=True, status=ErrorKind.NOT_FOUND)
        if body.file_path == "all":
            return {"status": True, "deleted_chunks": await rag.store.delete(None)}
        target = await document_named(rag.store, body.file_path)
        if target is None:
            raise APIError(ErrorKind.NOT_FOUND, f"No document named '{body.file_path}'.", "file_path")
        return {"status": True, "deleted_chunks": await rag.store.delete(target)}

    @router.get("/v1/dataprep/indices", response_model=list[str])
    async def indices(rag: RagDep) -> list:
        return [rag.settings.collection]

    @router.post("/v1/dataprep/indices", response_model=list[str])
    async def indices_post(rag: RagDep) -> list:
        """OPEA's clients POST."""
        return [rag.settings.collection]

    return router
