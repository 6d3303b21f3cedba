"""OPEA's dataprep routes: ingest (files, link_list, text; chunk_size and chunk_overlap per request), get, delete,
indices. HTTP only: the checks are validation.py's, the work ingestion/ingest.py's and the store's."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Request, Response, UploadFile
from fastapi.routing import APIRoute

from ovgenai_common.body import paced
from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.errors import APIError, ErrorKind

from .deps import IngestionDep, SettingsDep, StoreDep, get_ingest_pool
from .ingestion.ingest import Chunking, text_fields
from .protocol import DeleteRequest, DeleteResponse, DocumentEntry, GetRequest, IngestResponse
from .settings import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from .validation import check_index, chunking, document_named, links_of, lists_index


class IngestRoute(APIRoute):
    """A route admitted in two stages by the app's IngestPool (pool.py): a place for its body (or a wait in the
    queue, its body still in the client's socket, or a 429) before FastAPI reads it; then the body read whole,
    held to the upload pace (a 408 when it comes too slowly); and only then a slot for the work. A client that
    sends slowly holds a place, never a slot: others' ingests go on."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def admitted(request: Request) -> Response:
            pool = get_ingest_pool(request)
            async with pool.place():
                request = Request(request.scope, paced(request.receive, pool.pace))
                try:
                    async with pool.receiving_body():
                        await request.form()  # kept by the request: the handler reads this form
                    async with pool.slot():
                        return await handler(request)
                finally:
                    await request.close()  # its spooled files, also when the handler never ran

        return admitted


# The gateway's one route that takes uploads: its body alone may pass the JSON limit (app.py).
INGEST_PATH = "/v1/dataprep/ingest"

router = APIRouter()
# Ingests take a place before their bodies are read, a slot once read; the other routes read little.
ingest_router = APIRouter(route_class=IngestRoute)
router.include_router(ingest_router)


@ingest_router.post(INGEST_PATH, response_model=IngestResponse)
async def ingest(
    request: Request,
    settings: SettingsDep,
    ingestion: IngestionDep,
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
    check_index(settings.collection, index_name, allow_all=False, status=ErrorKind.INVALID_REQUEST)
    links = links_of(link_list, settings.max_links, settings.max_json_depth)
    if not files and not text and not links:
        raise APIError(ErrorKind.INVALID_REQUEST, "Send 'files' (multipart), 'link_list' and/or 'text' fields.",
                       "files")
    chunks = chunking(chunk_size, chunk_overlap, Chunking(settings.chunk_size, settings.chunk_overlap))
    work = ingestion.ingest(files or [], links, text_fields(text or [], name or []), chunks)
    # A client that leaves cancels its ingest: the store removes what it wrote (store.py), and its slot frees
    # now rather than after minutes of embedding for nobody.
    results = await cancel_on_disconnect(request, work)
    return {
        "status": 200,
        "message": "Data preparation succeeded",
        "documents": [{"name": r.name, "chunks": r.chunks, "status": r.status} for r in results],
        "total_chunks": sum(r.chunks for r in results),
    }


@router.get("/v1/dataprep/get", response_model=list[DocumentEntry])
async def list_documents(store: StoreDep) -> list:
    return await store.documents()


@router.post("/v1/dataprep/get", response_model=list[DocumentEntry])
async def list_documents_post(settings: SettingsDep, store: StoreDep, body: GetRequest | None = None) -> list:
    """OPEA's clients POST, with or without a body."""
    if not lists_index(settings.collection, body.index_name if body else None):
        return []
    return await store.documents()


@router.post("/v1/dataprep/delete", response_model=DeleteResponse)
async def delete(body: DeleteRequest, settings: SettingsDep, store: StoreDep) -> dict:
    check_index(settings.collection, body.index_name, allow_all=True, status=ErrorKind.NOT_FOUND)
    if body.file_path == "all":
        return {"status": True, "deleted_chunks": await store.delete(None)}
    target = await document_named(store, body.file_path)
    if target is None:
        raise APIError(ErrorKind.NOT_FOUND, f"No document named '{body.file_path}'.", "file_path")
    return {"status": True, "deleted_chunks": await store.delete(target)}


@router.get("/v1/dataprep/indices", response_model=list[str])
async def indices(settings: SettingsDep) -> list:
    return [settings.collection]


@router.post("/v1/dataprep/indices", response_model=list[str])
async def indices_post(settings: SettingsDep) -> list:
    """OPEA's clients POST."""
    return [settings.collection]
