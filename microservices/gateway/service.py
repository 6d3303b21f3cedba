"""Ingestion: uploads, links and text fields in, chunks embedded and stored, one result per document.

Everything that touches the disk or splits text (spooling an upload, hashing it, loading and splitting pages)
runs in worker threads, so that a large upload never stalls the event loop that streams other users' answers.
Uploads and fetched links are spooled to files whose names the server chooses, under a private folder removed
afterwards. Every upload and link is spooled before anything is stored, so a refused link or an upload over the
limit fails the request with nothing of it stored.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
from fastapi import UploadFile
from langchain_core.documents import Document

from ovgenai_common.errors import APIError, ErrorKind

from . import documents
from .links import LinkFetcher
from .rag import upstream_error
from .settings import GatewaySettings
from .store import DocumentStore, IngestResult

SPOOL_BLOCK = 1 << 20


@dataclass
class TextField:
    name: str
    body: str


@dataclass(frozen=True)
class Chunking:
    size: int
    overlap: int


def _split_pages(path: Path, kind: str, chunking: Chunking, name: str) -> Iterator[list[Document]]:
    """Each page's non-empty chunks, page by page (a large PDF is never held whole)."""
    split = documents.splitter(chunking.size, chunking.overlap, kind)
    for page in documents.load_pages(path, kind):
        page.metadata["source"] = name
        yield [chunk for chunk in split.split_documents([page]) if chunk.page_content.strip()]


async def _chunks(path: Path, kind: str, chunking: Chunking, name: str) -> AsyncIterator[Document]:
    pages = _split_pages(path, kind, chunking, name)
    while (chunks := await asyncio.to_thread(next, pages, None)) is not None:
        for chunk in chunks:
            yield chunk


async def _spool(upload: UploadFile, folder: Path, limit: int) -> Path:
    """Copy an upload to a server-named file, enforcing the size limit while copying."""
    suffix = Path(documents.safe_name(upload.filename)).suffix.lower()
    handle = await asyncio.to_thread(tempfile.NamedTemporaryFile, dir=folder, suffix=suffix, delete=False)
    path, size = Path(handle.name), 0
    try:
        while block := await upload.read(SPOOL_BLOCK):
            size += len(block)
            if size > limit:
                raise APIError(ErrorKind.PAYLOAD_TOO_LARGE,
                               f"'{upload.filename}' exceeds the upload limit of {limit} bytes.", "files")
            await asyncio.to_thread(handle.write, block)
    finally:
        await asyncio.to_thread(handle.close)
    if size == 0:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{upload.filename}' is empty.", "files")
    return path


class Ingestion:
    def __init__(self, store: DocumentStore, settings: GatewaySettings, links: LinkFetcher):
        self.store = store
        self.settings = settings
        self.links = links

    async def ingest(self, uploads: list[UploadFile], links: list[str], texts: list[TextField],
                     chunking: Chunking) -> list[IngestResult]:
        """Every document in order: files, links, texts. Everything is read (and refused) before anything is
        stored; a document that then fails to load stops the request with a 400, nothing of it stored."""
        names = [documents.safe_name(f.filename) for f in uploads]
        kinds = [documents.kind_of(name) for name in names]  # refuse unsupported types before reading anything
        for index, text in enumerate(texts):
            if not text.body.strip():
                raise APIError(ErrorKind.INVALID_REQUEST, f"Text field {index} is empty.", "text")
        workdir = Path(self.settings.data_dir) / "uploads"
        await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
        spool = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=workdir))
        try:
            staged: list[tuple[str, Path, str]] = []
            for name, kind, upload in zip(names, kinds, uploads, strict=True):
                staged.append((name, await _spool(upload, spool, self.settings.max_upload_bytes), kind))
            for link in links:
                fetched = await self.links.fetch(link, spool)
                staged.append((link, fetched.path, fetched.kind))
            for index, text in enumerate(texts):
                path = spool / f"text-{index}.txt"
                await asyncio.to_thread(path.write_text, text.body, encoding="utf-8")
                staged.append((text.name, path, "text"))
            return [await self._ingest_file(name, path, kind, chunking) for name, path, kind in staged]
        finally:
            await asyncio.to_thread(shutil.rmtree, spool, ignore_errors=True)

    async def _ingest_file(self, name: str, path: Path, kind: str, chunking: Chunking) -> IngestResult:
        # The same content chunked differently is a new version of the document.
        content = await asyncio.to_thread(documents.file_hash, path)
        version = documents.text_hash(f"{content}:{chunking.size}:{chunking.overlap}")
        try:
            return await self.store.ingest(name, version, _chunks(path, kind, chunking, name))
        except (openai.APIError, httpx.HTTPError) as error:
            raise upstream_error(error, "embedding service") from error


def text_fields(texts: list[str], names: list[str]) -> list[TextField]:
    """OPEA's parallel `text` / `name` form fields; a text without a name is named after its content."""
    return [
        TextField(documents.safe_name(names[i] if i < len(names) and names[i] else
                                      f"text-{documents.text_hash(body)[:12]}.txt"), body)
        for i, body in enumerate(texts)
    ]
