"""The document store: what the gateway asks of its chunks (ingest, delete, list, search), on Chroma (chroma.py),
each document whole or absent by its commit markers (versions.py).

Within one process, ingests and deletes of one name take turns (a lock per name). Replicas sharing a Chroma server
(VECTOR_STORE=server) have no common lock: each ingest still commits its chunks only once all are stored and removes
the versions older than its own (a later one, started elsewhere, removes it in turn), so they still end with one
version, the one started last; their start-up pass leaves uncommitted chunks younger than STALE_INGEST_SECONDS
alone, since another replica may still be writing them.

An ingest that fails or is cancelled (its client gone) before its version has replaced the others deletes what it
wrote: the store is left as it was. Each call to Chroma that an ingest makes on a thread is waited for even when the
ingest is cancelled (`_finish`), so that nothing it started still writes after it has cleaned up.

The collection records the vector space its chunks were embedded in (embedding.py): an ingest or a question
embedded in another is refused (409) before anything is embedded. An index that records none (made before indexes
kept one), or that holds no chunks, takes this gateway's at its first use.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from langchain_core.documents import Document
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from ovgenai_common.errors import APIError, ErrorKind

from . import versions
from .chroma import Chunks, StoreLocation
from .embedding import Embedder, VectorSpace, recorded_space
from .metrics import IngestMetrics
from .versions import COMMITTED, Recovery, Version

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Search:
    """OPEA's retriever parameters; scores are cosine similarities, distances 1 - similarity."""

    type: str = "similarity"
    fetch_k: int = 20
    lambda_mult: float = 0.5
    score_threshold: float = 0.2
    distance_threshold: float = 2.0


@dataclass
class IngestResult:
    name: str
    chunks: int
    status: str  # ingested | replaced | unchanged


async def _finish(work: Awaitable[T]) -> T:
    """`work` awaited to its end even if the caller is cancelled meanwhile, the cancellation raised after it. For
    store calls on a thread, which cannot be stopped half-way: an ingest cancelled while its chunks are written
    cleans up only once they are, or the write would land after the clean-up."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError()
    return result


class NameLocks:
    """One asyncio lock per document name, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(name, (None, 0))
        lock = lock or asyncio.Lock()
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            users = self._locks[name][1] - 1
            if users:
                self._locks[name] = (lock, users)
            else:
                del self._locks[name]


class DocumentStore:
    def __init__(self, location: StoreLocation, embedder: Embedder, embed_batch_size: int,
                 metrics: IngestMetrics | None = None):
        self.location = location
        self.embedder = embedder
        self.embed_batch_size = embed_batch_size
        self.metrics = metrics
        self.chunks = Chunks(location)
        self.locks = NameLocks()

    # ---- writes ------------------------------------------------------------------------------------------

    async def ingest(self, name: str, content_hash: str, chunks: AsyncIterator[Document]) -> IngestResult:
        async with self.locks.hold(name):
            await self.check_space()
            current = await asyncio.to_thread(versions.committed, self.chunks, name)
            if current and all(version.content_hash == content_hash for version in current.values()):
                return IngestResult(name, current[versions.newest(current)].committed, "unchanged")
            ingest = uuid.uuid4().hex
            version = Version(time.time_ns() // 1000, content_hash)  # an integer: stored and read back exactly
            written = 0
            try:
                batch: list[Document] = []
                async for chunk in chunks:
                    batch.append(chunk)
                    if len(batch) >= self.embed_batch_size:
                        written += await self._write(batch, name, ingest, version, written)
                        batch = []
                if batch:
                    written += await self._write(batch, name, ingest, version, written)
                await _finish(asyncio.to_thread(self._commit_whole, name, ingest, written))
                replaced = await _finish(asyncio.to_thread(versions.superseded, self.chunks, name, ingest))
            except BaseException:  # failed or cancelled: nothing of this version stays, the others are untouched
                await _finish(asyncio.to_thread(self.chunks.delete, versions.of(name, ingest)))
                raise
            # This version is whole and committed: the ingest has succeeded. What remains is deleting the versions
            # it replaced (or itself, where another replica committed a newer one meanwhile); a failure here only
            # leaves some of their chunks to the next ingest or delete of the name, or to the start-up pass, and the
            # listing already counts the newest version alone.
            try:
                await _finish(asyncio.to_thread(self._delete_versions, name, replaced))
            except Exception:
                logger.exception("%s: stored, but its previous version could not all be deleted", name)
            return IngestResult(name, written, "replaced" if current else "ingested")

    async def _write(self, batch: list[Document], name: str, ingest: str, version: Version, start: int) -> int:
        texts = [d.page_content for d in batch]
        vectors = await self.embedder.documents(texts)  # fails before anything is written
        ids = [f"{ingest}-{start + i}" for i in range(len(batch))]
        metadatas = [  # where the chunk is in its file, as its reader said (page, slide, sheet, rows, path), kept
            {"page": 0, **d.metadata, "source": name, "content_hash": version.content_hash, "chunk": start + i,
             "ingest": ingest, "started": version.started, "committed": False}
            for i, d in enumerate(batch)
        ]
        await _finish(asyncio.to_thread(self.chunks.upsert, ids, vectors, texts, metadatas))
        if self.metrics:
            self.metrics.chunks.inc(len(ids))
        logger.debug("%s: %d chunks written", name, start + len(ids))
        return len(ids)

    def _commit_whole(self, name: str, ingest: str, written: int) -> None:
        versions.commit(self.chunks, name, ingest, written)
        # Only another replica's delete can have removed some (a delete here waits for this ingest's lock).
        stored = len(self.chunks.ids(versions.of(name, ingest)))
        if stored != written:
            raise APIError(ErrorKind.UNAVAILABLE, f"'{name}' was deleted while it was being ingested; nothing of "
                                                  "it is stored. Send it again.")

    def _delete_versions(self, name: str, ingests: list[str]) -> None:
        for ingest in ingests:
            self.chunks.delete(versions.of(name, ingest))

    async def delete(self, name: str | None) -> int:
        """Delete a document (every version, committed or not), or every document; the chunks deleted. An ingest
        of the same name in flight finishes first."""
        names = [name] if name else await asyncio.to_thread(self._names)
        deleted = 0
        for each in names:
            async with self.locks.hold(each):
                deleted += await asyncio.to_thread(self.chunks.delete, {"source": each})
        return deleted

    def _names(self) -> list[str]:
        return sorted({metadata["source"] for _, metadata in self.chunks.pages()})

    def recover(self, abandon_before: float | None) -> Recovery:
        """The start-up pass (versions.py): every document whole or absent after a crash."""
        return versions.recover(self.chunks, abandon_before)

    # ---- the vector space ----------------------------------------------------------------------------------

    async def check_space(self) -> None:
        """A 409 where the index's chunks were embedded in another vector space; the index takes this gateway's
        where it records none or holds no chunks."""
        await asyncio.to_thread(self._check_space, await self.embedder.current_space())

    def _check_space(self, space: VectorSpace) -> None:
        mine, recorded = space.record(), recorded_space(self.chunks.metadata())
        if all(recorded.get(key) == value for key, value in mine.items()):
            return
        if space.differs(recorded) and self.chunks.count():
            raise space.conflict(recorded, self.location.collection)
        self.chunks.annotate(mine)

    async def embed_query(self, text: str) -> list[float]:
        """A question's vector, in the index's vector space (else the 409 of check_space)."""
        await self.check_space()
        return await self.embedder.query(text)

    # ---- reads -------------------------------------------------------------------------------------------

    async def documents(self) -> list[dict[str, Any]]:
        """OPEA's entries (name, id, type, parent), with each document's chunk count (its newest version's)."""
        counts = await asyncio.to_thread(versions.newest_counts, self.chunks)
        return [{"name": name, "id": name, "type": "File", "parent": "", "chunks": counts[name]}
                for name in sorted(counts)]

    async def has(self, name: str) -> bool:
        return await asyncio.to_thread(self.chunks.exists, versions.committed_of(name))

    async def count(self) -> int:
        return await asyncio.to_thread(self.chunks.count)

    async def search(self, vector: list[float], k: int, search: Search | None = None) -> list[tuple[Document, float]]:
        """The k best committed chunks with their cosine similarity, by OPEA's search types."""
        search = search or Search()
        if search.type == "mmr":
            def run() -> list[tuple[Document, float]]:
                candidates = self.chunks.nearest(vector, max(search.fetch_k, k), COMMITTED, embeddings=True)
                if not candidates:
                    return []
                chosen = maximal_marginal_relevance(np.array(vector, dtype=np.float32),
                                                    [hit.embedding for hit in candidates], k=k,
                                                    lambda_mult=search.lambda_mult)
                return [(candidates[i].document, candidates[i].score) for i in chosen]

            return await asyncio.to_thread(run)
        hits = [(hit.document, hit.score)
                for hit in await asyncio.to_thread(self.chunks.nearest, vector, k, COMMITTED)]
        if search.type == "similarity_score_threshold":
            hits = [(doc, score) for doc, score in hits if score >= search.score_threshold]
        elif search.type == "similarity_distance_threshold":
            hits = [(doc, score) for doc, score in hits if 1.0 - score <= search.distance_threshold]
        return hits

    async def healthy(self) -> tuple[bool, str]:
        try:
            await asyncio.to_thread(self.chunks.heartbeat)
            return True, f"{self.location.mode} ({await self.count()} chunks)"
        except Exception as error:
            return False, f"vector store unreachable: {type(error).__name__}"
