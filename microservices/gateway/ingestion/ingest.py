"""Ingestion: uploads, links and text fields in, chunks embedded and stored, one result per document.

Everything that touches the disk or splits text (spooling an upload, hashing it, loading and splitting sections)
runs on ingestion's own worker threads (pool.py), so that a large upload never stalls the event loop that
streams other users' answers. Uploads and fetched links are spooled to files whose names the server chooses, under
a private folder removed afterwards (and, after a crash, at the next start: `sweep_spool`). Every upload and link
is spooled before anything is stored, so a refused link or an upload over the limit fails the request with nothing
of it stored.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
from fastapi import UploadFile
from langchain_core.documents import Document

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.upstream import upstream_error

from ..store import DocumentStore, IngestResult
from . import files, readers
from .links import LinkFetcher
from .pool import IngestPool

logger = logging.getLogger(__name__)
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
    split = readers.splitter(chunking.size, chunking.overlap, kind)
    for page in readers.load_pages(path, kind):
        page.metadata["source"] = name
        yield [chunk for chunk in split.split_documents([page]) if chunk.page_content.strip()]


async def _chunks(pool: IngestPool, path: Path, kind: str, chunking: Chunking, name: str) -> AsyncIterator[Document]:
    pages = _split_pages(path, kind, chunking, name)
    while (chunks := await pool.run(next, pages, None)) is not None:
        for chunk in chunks:
            yield chunk


async def _spool(pool: IngestPool, upload: UploadFile, folder: Path, limit: int) -> Path:
    """Copy an upload to a server-named file, enforcing the size limit while copying."""
    suffix = Path(files.safe_name(upload.filename)).suffix.lower()
    handle = await pool.run(lambda: tempfile.NamedTemporaryFile(dir=folder, suffix=suffix, delete=False))
    path, size = Path(handle.name), 0
    try:
        while block := await upload.read(SPOOL_BLOCK):
            size += len(block)
            if size > limit:
                raise APIError(ErrorKind.PAYLOAD_TOO_LARGE,
                               f"'{upload.filename}' exceeds the upload limit of {limit} bytes.", "files")
            await pool.run(handle.write, block)
    finally:
        await pool.run(handle.close)
    if size == 0:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{upload.filename}' is empty.", "files")
    return path


@dataclass(frozen=True)
class IngestLimits:
    """Where uploads are spooled (under DATA_DIR), MAX_UPLOAD_BYTES and MAX_HTML_BYTES."""

    spool_root: Path
    max_upload_bytes: int
    max_html_bytes: int


def spool_root(data_dir: str | Path) -> Path:
    return Path(data_dir) / "uploads"


def sweep_spool(root: Path, older_than: float | None) -> int:
    """Remove spool folders left by ingests that never finished (the process was killed): those last changed
    before `older_than`, or all of them (None); how many were removed."""
    removed = 0
    for folder in root.iterdir() if root.is_dir() else ():
        if older_than is None or folder.stat().st_mtime < older_than:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    if removed:
        logger.warning("removed %d upload spool folders of interrupted ingests", removed)
    return removed


def recover(store: DocumentStore, root: Path, stale_seconds: float | None) -> None:
    """The start-up pass: whole-or-absent documents and no spooled uploads left behind by a crash. The embedded
    store and its data_dir belong to this process alone (`stale_seconds` None: everything unfinished is removed); a
    Chroma server's other replicas may be mid-ingest, so only what is older than STALE_INGEST_SECONDS is theirs no
    longer."""
    older_than = None if stale_seconds is None else time.time() - stale_seconds
    store.recover(older_than)
    sweep_spool(root, older_than)


class Ingestion:
    def __init__(self, store: DocumentStore, links: LinkFetcher, pool: IngestPool, limits: IngestLimits):
        self.store = store
        self.links = links
        self.pool = pool
        self.limits = limits

    async def ingest(self, uploads: list[UploadFile], links: list[str], texts: list[TextField],
                     chunking: Chunking) -> list[IngestResult]:
        """Every document in order: files, links, texts. Everything is read (and refused) before anything is
        stored; a document that then fails to load stops the request with a 400, nothing of it stored."""
        names = [files.safe_name(f.filename) for f in uploads]
        _refuse_shared_names([(name, f.filename or "", "files") for name, f in zip(names, uploads, strict=True)]
                             + [(link, link, "link_list") for link in links]
                             + [(text.name, text.name, "name") for text in texts])
        kinds = [files.kind_of(name) for name in names]  # refuse unsupported types before reading anything
        for index, text in enumerate(texts):
            if not text.body.strip():
                raise APIError(ErrorKind.INVALID_REQUEST, f"Text field {index} is empty.", "text")
        workdir = self.limits.spool_root
        await self.pool.run(lambda: workdir.mkdir(parents=True, exist_ok=True))
        spool = Path(await self.pool.run(lambda: tempfile.mkdtemp(dir=workdir)))
        try:
            staged: list[tuple[str, Path, str]] = []
            for name, kind, upload in zip(names, kinds, uploads, strict=True):
                path = await _spool(self.pool, upload, spool, self.limits.max_upload_bytes)
                await self._check_html_size(name, path, kind, "files")
                staged.append((name, path, kind))
            for link in links:
                fetched = await self.links.fetch(link, spool)
                await self._check_html_size(link, fetched.path, fetched.kind, "link_list")
                staged.append((link, fetched.path, fetched.kind))
            for index, text in enumerate(texts):
                path = spool / f"text-{index}.txt"
                await self.pool.run(lambda path=path, body=text.body: path.write_text(body, encoding="utf-8"))
                staged.append((text.name, path, "text"))
            return [await self._ingest_file(name, path, kind, chunking) for name, path, kind in staged]
        finally:
            await self.pool.run(lambda: shutil.rmtree(spool, ignore_errors=True))

    async def _check_html_size(self, name: str, path: Path, kind: str, param: str) -> None:
        limit = self.limits.max_html_bytes
        if kind == "html" and (await self.pool.run(path.stat)).st_size > limit:
            raise APIError(ErrorKind.PAYLOAD_TOO_LARGE,
                           f"'{name}' is an HTML page larger than {limit} bytes, the most parsed (MAX_HTML_BYTES).",
                           param)

    async def _ingest_file(self, name: str, path: Path, kind: str, chunking: Chunking) -> IngestResult:
        # The same content chunked differently is a new version of the document.
        content = await self.pool.run(files.file_hash, path)
        version = files.text_hash(f"{content}:{chunking.size}:{chunking.overlap}")
        try:
            return await self.store.ingest(name, version, _chunks(self.pool, path, kind, chunking, name))
        except (openai.APIError, httpx.HTTPError) as error:
            raise upstream_error("embedding service", error) from error


def _refuse_shared_names(entries: list[tuple[str, str, str]]) -> None:
    """A document is stored under its name (a file's without its folders or surrounding spaces): two documents of
    one request that would share a name are refused, as one would silently replace the other. (A name from an
    earlier request is replaced on purpose: that is how a document is updated.) `entries`: the stored name, the name
    as the client sent it, and the form field."""
    sent: dict[str, list[tuple[str, str]]] = {}
    for name, given, param in entries:
        sent.setdefault(name, []).append((given, param))
    for name, senders in sent.items():
        if len(senders) > 1:
            given = ", ".join(f"'{each}'" for each, _ in senders)
            raise APIError(ErrorKind.INVALID_REQUEST,
                           f"{given} would all be stored as the one document '{name}' (a document is named by its "
                           "file name, without folders); give each a name of its own, or send them in separate "
                           "requests to replace one with the other.", senders[0][1])


def text_fields(texts: list[str], names: list[str]) -> list[TextField]:
    """OPEA's parallel `text` / `name` form fields; a text without a name is named after its content."""
    return [
        TextField(files.safe_name(names[i] if i < len(names) and names[i] else
                                      f"text-{files.text_hash(body)[:12]}.txt"), body)
        for i, body in enumerate(texts)
    ]
