"""Ingestion: uploads, links and text fields in, chunks embedded and stored in an index, one result per document.

Everything that touches the disk or splits text (spooling an upload, hashing it, loading and splitting sections)
runs on ingestion's own worker threads (pool.py), so that a large upload never stalls the event loop that
streams other users' answers. Uploads and fetched links are spooled to files whose names the server chooses, under
a private folder removed afterwards (and, after a crash, at the next start: `sweep_spool`). Every upload and link
is spooled, measured and read to its sections (spooled beside it, one JSON line each) before anything is stored,
so a refused link, an upload over a limit or a file its reader cannot read fails the request, naming it, with
nothing of the request stored and no index made.
"""

from __future__ import annotations

import json
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

from ..indices import Indices
from ..store import DocumentStore, IngestResult
from . import files, office, readers
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


@dataclass(frozen=True)
class Staged:
    """A document spooled: its name, file, kind, and the form field it came in."""

    name: str
    path: Path
    kind: str
    param: str


@dataclass(frozen=True)
class Read:
    """A document read: its name, version (content and chunking), kind, and its sections' spool file."""

    name: str
    version: str
    kind: str
    sections: Path


def _read_sections(document: Staged, record_chars: int, out: Path) -> None:
    """The document's sections (text and where it is), one JSON line each, read to its end."""
    try:
        with out.open("w", encoding="utf-8") as handle:
            for page in readers.load_pages(document.path, document.kind, record_chars):
                handle.write(json.dumps([page.page_content, page.metadata]) + "\n")
    except readers.Unreadable as error:
        raise APIError(ErrorKind.INVALID_REQUEST, f"Could not read '{document.name}' as {document.kind}: {error}",
                       document.param) from error


def _split_pages(read: Read, chunking: Chunking) -> Iterator[list[Document]]:
    """Each section's non-empty chunks, section by section (a large file is never held whole)."""
    split = readers.splitter(chunking.size, chunking.overlap, read.kind)
    with read.sections.open(encoding="utf-8") as handle:
        for line in handle:
            text, metadata = json.loads(line)
            page = Document(text, metadata={**metadata, "source": read.name})
            yield [chunk for chunk in split.split_documents([page]) if chunk.page_content.strip()]


async def _chunks(pool: IngestPool, read: Read, chunking: Chunking) -> AsyncIterator[Document]:
    pages = _split_pages(read, chunking)
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
    """Where uploads are spooled (under DATA_DIR), MAX_UPLOAD_BYTES, MAX_HTML_BYTES and MAX_PARSED_BYTES."""

    spool_root: Path
    max_upload_bytes: int
    max_html_bytes: int
    max_parsed_bytes: int


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


def recover(indices: Indices, root: Path, stale_seconds: float | None) -> None:
    """The start-up pass: whole-or-absent documents and no spooled uploads left behind by a crash. The embedded
    store and its data_dir belong to this process alone (`stale_seconds` None: everything unfinished is removed); a
    Chroma server's other replicas may be mid-ingest, so only what is older than STALE_INGEST_SECONDS is theirs no
    longer."""
    older_than = None if stale_seconds is None else time.time() - stale_seconds
    indices.recover(older_than)
    sweep_spool(root, older_than)


class Ingestion:
    def __init__(self, indices: Indices, links: LinkFetcher, pool: IngestPool, limits: IngestLimits):
        self.indices = indices
        self.links = links
        self.pool = pool
        self.limits = limits

    async def ingest(self, uploads: list[UploadFile], links: list[str], texts: list[TextField],
                     chunking: Chunking, index: str | None = None) -> list[IngestResult]:
        """Every document in order, files, links, texts, into the index `index` (None: the default one; another is
        made by its first ingest). Everything is read (and refused) before anything is stored or an index made."""
        names = [files.safe_name(f.filename) for f in uploads]
        _refuse_shared_names([(name, f.filename or "", "files") for name, f in zip(names, uploads, strict=True)]
                             + [(link, link, "link_list") for link in links]
                             + [(text.name, text.name, "name") for text in texts])
        # Unsupported types are refused before anything is read.
        kinds = [files.kind_of(name, f.content_type) for name, f in zip(names, uploads, strict=True)]
        for number, text in enumerate(texts):
            if not text.body.strip():
                raise APIError(ErrorKind.INVALID_REQUEST, f"Text field {number} is empty.", "text")
        workdir = self.limits.spool_root
        await self.pool.run(lambda: workdir.mkdir(parents=True, exist_ok=True))
        spool = Path(await self.pool.run(lambda: tempfile.mkdtemp(dir=workdir)))
        try:
            staged: list[Staged] = []
            for name, kind, upload in zip(names, kinds, uploads, strict=True):
                path = await _spool(self.pool, upload, spool, self.limits.max_upload_bytes)
                staged.append(await self._measured(Staged(name, path, kind, "files")))
            for link in links:
                fetched = await self.links.fetch(link, spool)
                staged.append(await self._measured(Staged(link, fetched.path, fetched.kind, "link_list")))
            for number, text in enumerate(texts):
                path = spool / f"text-{number}.txt"
                await self.pool.run(lambda path=path, body=text.body: path.write_text(body, encoding="utf-8"))
                staged.append(Staged(text.name, path, "text", "text"))
            read = [await self._read(document, chunking, spool / f"{number}.sections")
                    for number, document in enumerate(staged)]
            async with self.indices.writing(index) as store:
                return [await self._ingest_file(store, document, chunking) for document in read]
        finally:
            await self.pool.run(lambda: shutil.rmtree(spool, ignore_errors=True))

    async def _measured(self, document: Staged) -> Staged:
        """`document`, once its size is within what its reader may parse: a 413 (or a 400 for an Office file that is
        no zip archive) naming it otherwise."""
        name, limits = document.name, self.limits
        too_large = None
        if document.kind == "html" and (await self.pool.run(document.path.stat)).st_size > limits.max_html_bytes:
            too_large = (f"'{name}' is an HTML page larger than {limits.max_html_bytes} bytes, the most parsed "
                         "(MAX_HTML_BYTES).")
        elif document.kind == "json" and (await self.pool.run(document.path.stat)).st_size > limits.max_parsed_bytes:
            too_large = (f"'{name}' is a JSON file larger than {limits.max_parsed_bytes} bytes, the most read whole "
                         "(MAX_PARSED_BYTES).")
        elif document.kind in office.OFFICE:
            try:
                await self.pool.run(office.check_package, document.path, document.kind, limits.max_upload_bytes,
                                    limits.max_parsed_bytes)
            except office.TooLarge as error:
                too_large = f"'{name}' {error}."
            except readers.Unreadable as error:
                raise APIError(ErrorKind.INVALID_REQUEST, f"Could not read '{name}' as {document.kind}: {error}.",
                               document.param) from error
        if too_large:
            raise APIError(ErrorKind.PAYLOAD_TOO_LARGE, too_large, document.param)
        return document

    async def _read(self, document: Staged, chunking: Chunking, out: Path) -> Read:
        # The same content chunked differently is a new version of the document.
        content = await self.pool.run(files.file_hash, document.path)
        version = files.text_hash(f"{content}:{chunking.size}:{chunking.overlap}")
        await self.pool.run(_read_sections, document, chunking.size, out)
        return Read(document.name, version, document.kind, out)

    async def _ingest_file(self, store: DocumentStore, read: Read, chunking: Chunking) -> IngestResult:
        try:
            return await store.ingest(read.name, read.version, _chunks(self.pool, read, chunking))
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
