"""OPEA's dataprep routes: ingest (files, link_list, text; chunk_size and chunk_overlap per request; index_name),
get, delete, indices. HTTP only: the checks are validation.py's and the indices', the work ingestion/ingest.py's and
the store's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Request, Response, UploadFile
from fastapi.routing import APIRoute

from ovgenai_common.body import paced
from ovgenai_common.cancellation import cancel_on_disconnect
from ovgenai_common.errors import APIError, ErrorKind

from .deps import IndicesDep, IngestionDep, SettingsDep, get_ingest_pool
from .indices import ALL, Indices
from .ingestion.ingest import Chunking, text_fields
from .protocol import DeleteRequest, DeleteResponse, DocumentEntry, GetRequest, IngestResponse
from .settings import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from .store import DocumentStore
from .validation import chunking, document_named, links_of


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
    indices: IndicesDep,
    files: Annotated[list[UploadFile] | None, File(
        description="Documents: .txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .csv, .json.")] = None,
    link_list: Annotated[str | None, Form(
        description='A JSON array of http(s) URLs, e.g. \'["https://example.com/page"]\': any kind of files.'
    )] = None,
    text: Annotated[list[str] | None, Form(description="Texts to ingest as documents.")] = None,
    name: Annotated[list[str] | None, Form(description="The name of each text, in order.")] = None,
    chunk_size: Annotated[int | None, Form(ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE,
                                           description="Characters per chunk (default CHUNK_SIZE).")] = None,
    chunk_overlap: Annotated[int | None, Form(
        ge=0, lt=MAX_CHUNK_SIZE,
        description="Characters neighbouring chunks share, less than chunk_size (default CHUNK_OVERLAP, at most "
                    "half of chunk_size).")] = None,
    index_name: Annotated[str | None, Form(
        description="The index (default COLLECTION_NAME), made by its first ingest.")] = None,
    process_table: Annotated[bool, Form(
        description="Accepted for OPEA's clients: a PDF's tables are read as its page text.")] = False,
    table_strategy: Annotated[Literal["fast", "hq", "llm"], Form(
        description="Accepted for OPEA's clients: a PDF's tables are read as its page text.")] = "fast",
) -> dict:
    del process_table, table_strategy  # accepted only: see their descriptions
    index = indices.name_of(index_name)
    links = links_of(link_list, settings.max_links, settings.max_json_depth)
    if not files and not text and not links:
        raise APIError(ErrorKind.INVALID_REQUEST, "Send 'files' (multipart), 'link_list' and/or 'text' fields.",
                       "files")
    chunks = chunking(chunk_size, chunk_overlap, Chunking(settings.chunk_size, settings.chunk_overlap))
    work = ingestion.ingest(files or [], links, text_fields(text or [], name or []), chunks, index)
    # A client that leaves cancels its ingest: the store removes what it wrote (store.py), and its slot frees
    # now rather than after minutes of embedding for nobody.
    results = await cancel_on_disconnect(request, work)
    return {
        "status": 200,
        "message": "Data preparation succeeded",
        "documents": [{"name": r.name, "chunks": r.chunks, "status": r.status} for r in results],
        "total_chunks": sum(r.chunks for r in results),
    }


async def _stores(indices: Indices, name: str | None) -> list[DocumentStore]:
    """The stores `name` means: every index for 'all', else the one named (none where it does not exist)."""
    names = await asyncio.to_thread(indices.names) if name == ALL else [name]
    return [store for each in names if (store := await indices.find(each)) is not None]


async def _entries(indices: Indices, name: str | None) -> list[dict]:
    return [{**entry, "index_name": store.location.collection}
            for store in await _stores(indices, name) for entry in await store.documents()]


@router.get("/v1/dataprep/get", response_model=list[DocumentEntry])
async def list_documents(indices: IndicesDep) -> list:
    """The default index's documents."""
    return await _entries(indices, None)


@router.post("/v1/dataprep/get", response_model=list[DocumentEntry])
async def list_documents_post(indices: IndicesDep, body: GetRequest | None = None) -> list:
    """OPEA's clients POST, with or without a body; an index that does not exist lists nothing, as in OPEA."""
    return await _entries(indices, body.index_name if body else None)


@router.post("/v1/dataprep/delete", response_model=DeleteResponse)
async def delete(body: DeleteRequest, indices: IndicesDep) -> dict:
    """A document of an index, or (file_path 'all') every document of it and the index with them; without an
    index_name, 'all' means every index, as in OPEA."""
    if body.index_name == ALL or (body.index_name is None and body.file_path == "all"):
        stores = await _stores(indices, ALL)
    else:
        stores = [await indices.get(body.index_name)]  # a 404 naming an index that does not exist
    if body.file_path == "all":
        return {"status": True, "deleted_chunks": sum([await indices.drop(store) for store in stores])}
    targets = [(store, target) for store in stores
               if (target := await document_named(store, body.file_path)) is not None]
    if not targets:
        where = f" in the index '{stores[0].location.collection}'" if len(stores) == 1 else ""
        raise APIError(ErrorKind.NOT_FOUND, f"No document named '{body.file_path}'{where}.", "file_path")
    return {"status": True, "deleted_chunks": sum([await store.delete(target) for store, target in targets])}


# The page (and any client) finds which index requests without an index_name use; the body stays OPEA's list.
DEFAULT_INDEX_HEADER = "X-Default-Index"


@router.get("/v1/dataprep/indices", response_model=list[str])
async def list_indices(indices: IndicesDep, response: Response) -> list:
    """Every index's name, the default (DEFAULT_INDEX_HEADER) among them."""
    response.headers[DEFAULT_INDEX_HEADER] = indices.default_name
    return await asyncio.to_thread(indices.names)


@router.post("/v1/dataprep/indices", response_model=list[str])
async def list_indices_post(indices: IndicesDep, response: Response) -> list:
    """OPEA's clients POST."""
    return await list_indices(indices, response)
