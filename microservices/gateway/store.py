"""The document store: a Chroma collection, embedded (persisted under data_dir) or on a Chroma server.

Chroma is the choice because both of its modes are real and testable here: `chromadb.PersistentClient` embeds
the store in the gateway's process with durable files, and the same package ships `chroma run`, a server the
tests start on loopback for the scale-out mode. Telemetry is switched off in both.

An acknowledged document is whole, or absent. Chroma has no transactions, so each ingest writes its chunks marked
`committed: false` under an ingest id of its own, and only once every chunk is stored marks them committed (with
the document's chunk count, `total`); listing, retrieval and the "unchanged" check see committed chunks only. Then
the document's other versions are deleted, the newest ingest winning, so a failed re-ingest leaves the previous
version intact and concurrent ingests of one name end with one version. A crash can leave uncommitted chunks, a
half-done commit or two committed versions: `recover()` runs before the gateway serves and removes the first (a
document's chunks that were never all stored), finishes the second (its chunks were all stored before the commit
began, which `total` lets it check) and keeps the newest of the third. Chunks written before these markers existed
are marked committed by the same pass.

Within one process, ingests and deletes of one name take turns (a lock per name). Replicas sharing a Chroma server
(VECTOR_STORE=server) have no common lock: each ingest still commits its chunks only once all are stored and removes
the versions older than its own (a later one, started elsewhere, removes it in turn), so they still end with one
version, the one started last; their start-up pass leaves uncommitted chunks younger than STALE_INGEST_SECONDS
alone, since another replica may still be writing them.

An ingest that fails or is cancelled (its client gone) before its version has replaced the others deletes what it
wrote: the store is left as it was. Each call to Chroma that an ingest makes on a thread is waited for even when the
ingest is cancelled (`_finish`), so that nothing it started still writes after it has cleaned up. Every read or
delete that can touch many chunks goes a page of BATCH at a time: Chroma reads a selection's metadata in one SQLite
statement, which fails past 32,766 chunks ("too many SQL variables").
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from ovgenai_common.errors import APIError, ErrorKind

from .metrics import IngestMetrics

logger = logging.getLogger(__name__)
T = TypeVar("T")
# Chunks read, marked committed or deleted per call to Chroma (below its own maximum batch size, and far below
# SQLite's 32,766 variables per statement).
BATCH = 1000
COMMITTED = {"committed": True}
# The ingest id given to chunks stored before commit markers existed.
LEGACY = "legacy"
# Neighbours fetched beyond those asked for, so that uncommitted chunks can be dropped; and how many to fetch at
# most before letting Chroma filter instead (see `_nearest`).
OVERFETCH = 16
FILTER_FROM = 1024


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


@dataclass
class Version:
    """One ingest's chunks of a document, as the store holds them."""

    started: int  # microseconds since the epoch
    content_hash: str = ""
    committed: int = 0
    pending: int = 0
    total: int | None = None  # set when the commit began: every chunk was stored by then

    def complete(self) -> bool:
        return self.total is not None and self.committed + self.pending == self.total


@dataclass
class Hit:
    document: Document
    score: float  # cosine similarity
    embedding: Any = None


@dataclass
class Recovery:
    removed: int = 0  # uncommitted chunks of documents never completely stored
    finished: int = 0  # chunks of interrupted commits, marked committed
    superseded: int = 0  # chunks of older versions
    migrated: int = 0  # chunks from before the markers


def _newest(versions: dict[str, Version]) -> str:
    """The version started last (ties, across replicas' clocks, go to the larger ingest id)."""
    return max(versions, key=lambda ingest: (versions[ingest].started, ingest))


def _of(name: str, ingest: str) -> dict[str, Any]:
    return {"$and": [{"source": name}, {"ingest": ingest}]}


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


@dataclass(frozen=True)
class StoreLocation:
    """Where the chunks live: VECTOR_STORE=embedded under DATA_DIR, or =server at CHROMA_HOST:CHROMA_PORT; and
    the collection (COLLECTION_NAME)."""

    collection: str
    mode: Literal["embedded", "server"] = "embedded"
    data_dir: Path = Path("data/gateway")
    host: str = "localhost"
    port: int = 8000


def make_client(location: StoreLocation):
    import chromadb
    from chromadb.config import Settings

    chroma_settings = Settings(anonymized_telemetry=False)
    if location.mode == "server":
        return chromadb.HttpClient(host=location.host, port=location.port, settings=chroma_settings)
    path = Path(location.data_dir) / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


class DocumentStore:
    def __init__(self, location: StoreLocation, embeddings: Embeddings, embed_batch_size: int,
                 metrics: IngestMetrics | None = None):
        self.location = location
        self.embeddings = embeddings
        self.embed_batch_size = embed_batch_size
        self.metrics = metrics
        self.client = make_client(location)
        # chromadb's own API: vectors are computed beforehand (so a failed embedding call writes nothing), chunks
        # are marked committed by updating their metadata, and searches drop uncommitted chunks (`_nearest`).
        self.collection = self.client.get_or_create_collection(
            location.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        self.locks = NameLocks()

    # ---- versions ----------------------------------------------------------------------------------------

    def _pages(self, where: dict[str, Any] | None = None,
               include: tuple[str, ...] = ("metadatas",)) -> Iterator[tuple[str, dict[str, Any]]]:
        """The id and metadata (an empty dict when not included) of every chunk `where` selects, a page at a time
        (Chroma keeps them in the order they were stored: chunks added meanwhile come on later pages)."""
        offset = 0
        while True:
            page = self.collection.get(where=where, include=list(include), limit=BATCH, offset=offset)
            metadatas = page["metadatas"] if "metadatas" in include else [{}] * len(page["ids"])
            yield from zip(page["ids"], metadatas, strict=True)
            if len(page["ids"]) < BATCH:
                return
            offset += BATCH

    def _ids(self, where: dict[str, Any]) -> list[str]:
        return [chunk_id for chunk_id, _ in self._pages(where, include=())]

    def _versions(self, where: dict[str, Any]) -> dict[str, Version]:
        """The versions of the chunks that `where` selects, by ingest id."""
        versions: dict[str, Version] = {}
        for _, metadata in self._pages(where):
            version = versions.setdefault(metadata.get("ingest", LEGACY), Version(metadata.get("started", 0),
                                                                                   metadata.get("content_hash", "")))
            if metadata.get("committed"):
                version.committed += 1
                version.total = metadata.get("total", version.total)
            else:
                version.pending += 1
        return versions

    def _committed(self, name: str) -> dict[str, Version]:
        return self._versions({"$and": [{"source": name}, COMMITTED]})

    def _delete(self, where: dict[str, Any]) -> int:
        ids = self._ids(where)  # every page read before any is deleted: deleting would shift the pages
        for start in range(0, len(ids), BATCH):
            self.collection.delete(ids=ids[start:start + BATCH])
        return len(ids)

    def _commit(self, name: str, ingest: str, total: int) -> int:
        """Mark an ingest's uncommitted chunks committed, `total` being how many it has in all; how many were."""
        pending = {"$and": [{"source": name}, {"ingest": ingest}, {"committed": False}]}
        ids = self._ids(pending)  # read whole first: marking chunks committed takes them out of the selection
        for start in range(0, len(ids), BATCH):
            batch = self.collection.get(ids=ids[start:start + BATCH], include=["metadatas"])
            self.collection.update(ids=batch["ids"], metadatas=[{**metadata, "committed": True, "total": total}
                                                                for metadata in batch["metadatas"]])
        return len(ids)

    def _keep_newest(self, name: str) -> int:
        """Delete every committed version of `name` but the newest; the chunks deleted."""
        versions = self._committed(name)
        if len(versions) < 2:
            return 0
        newest = _newest(versions)
        return sum(self._delete(_of(name, ingest)) for ingest in versions if ingest != newest)

    # ---- writes ------------------------------------------------------------------------------------------

    async def ingest(self, name: str, content_hash: str, chunks: AsyncIterator[Document]) -> IngestResult:
        async with self.locks.hold(name):
            current = await asyncio.to_thread(self._committed, name)
            if current and all(version.content_hash == content_hash for version in current.values()):
                return IngestResult(name, current[_newest(current)].committed, "unchanged")
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
                replaced = await _finish(asyncio.to_thread(self._superseded, name, ingest))
            except BaseException:  # failed or cancelled: nothing of this version stays, the others are untouched
                await _finish(asyncio.to_thread(self._delete, _of(name, ingest)))
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
        vectors = await self.embeddings.aembed_documents(texts)  # fails before anything is written
        ids = [f"{ingest}-{start + i}" for i in range(len(batch))]
        metadatas = [
            {"source": name, "content_hash": version.content_hash, "chunk": start + i,
             "page": d.metadata.get("page", 0), "ingest": ingest, "started": version.started, "committed": False}
            for i, d in enumerate(batch)
        ]
        await _finish(asyncio.to_thread(self.collection.upsert, ids=ids, embeddings=vectors, documents=texts,
                                        metadatas=metadatas))
        if self.metrics:
            self.metrics.chunks.inc(len(ids))
        logger.debug("%s: %d chunks written", name, start + len(ids))
        return len(ids)

    def _commit_whole(self, name: str, ingest: str, written: int) -> None:
        self._commit(name, ingest, written)
        # Only another replica's delete can have removed some (a delete here waits for this ingest's lock).
        stored = len(self._ids(_of(name, ingest)))
        if stored != written:
            raise APIError(ErrorKind.UNAVAILABLE, f"'{name}' was deleted while it was being ingested; nothing of "
                                                  "it is stored. Send it again.")

    def _superseded(self, name: str, ingest: str) -> list[str]:
        """The committed versions of `name` that this ingest replaces: those older than it; and itself, if a newer
        one was committed meanwhile (by another replica)."""
        versions = self._committed(name)
        if ingest not in versions:
            return []
        mine = (versions[ingest].started, ingest)
        older = [other for other, version in versions.items() if other != ingest and (version.started, other) < mine]
        newer = any((version.started, other) > mine for other, version in versions.items() if other != ingest)
        return [*older, *([ingest] if newer else [])]

    def _delete_versions(self, name: str, ingests: list[str]) -> None:
        for ingest in ingests:
            self._delete(_of(name, ingest))

    async def delete(self, name: str | None) -> int:
        """Delete a document (every version, committed or not), or every document; the chunks deleted. An ingest
        of the same name in flight finishes first."""
        names = [name] if name else await asyncio.to_thread(self._names)
        deleted = 0
        for each in names:
            async with self.locks.hold(each):
                deleted += await asyncio.to_thread(self._delete, {"source": each})
        return deleted

    def _names(self) -> list[str]:
        return sorted({metadata["source"] for _, metadata in self._all()})

    def _all(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every chunk's id and metadata, a page at a time."""
        return self._pages()

    # ---- start-up ----------------------------------------------------------------------------------------

    def recover(self, abandon_before: float | None) -> Recovery:
        """Make every document whole or absent after a crash (see the module's docstring). Uncommitted chunks of
        ingests started before `abandon_before` (seconds since the epoch) are removed; None: all are (nobody else
        writes to this store)."""
        report = Recovery()
        versions: dict[tuple[str, str], Version] = {}
        legacy: dict[str, list[str]] = {}
        for chunk_id, metadata in self._all():
            if "ingest" not in metadata:
                legacy.setdefault(metadata.get("source", ""), []).append(chunk_id)
                continue
            version = versions.setdefault((metadata["source"], metadata["ingest"]),
                                          Version(metadata.get("started", 0)))
            if metadata.get("committed"):
                version.committed += 1
                version.total = metadata.get("total", version.total)
            else:
                version.pending += 1
        for name, ids in legacy.items():  # stored before these markers, when every ingest ended complete or failed
            for start in range(0, len(ids), BATCH):
                batch = self.collection.get(ids=ids[start:start + BATCH], include=["metadatas"])
                self.collection.update(ids=batch["ids"], metadatas=[
                    {**metadata, "ingest": LEGACY, "started": 0, "committed": True, "total": len(ids)}
                    for metadata in batch["metadatas"]])
            versions[(name, LEGACY)] = Version(0, committed=len(ids), total=len(ids))
            report.migrated += len(ids)
        for (name, ingest), version in versions.items():
            if version.pending and version.committed and version.complete():
                report.finished += self._commit(name, ingest, version.total or 0)  # every chunk was stored
                version.committed, version.pending = version.committed + version.pending, 0
            elif not (version.complete() and not version.pending) and (
                    abandon_before is None or version.started < abandon_before * 1_000_000):
                report.removed += self._delete(_of(name, ingest))
                version.committed = version.pending = 0
        committed = Counter(name for (name, _), version in versions.items() if version.committed)
        for name in (name for name, count in committed.items() if count > 1):
            report.superseded += self._keep_newest(name)
        if any(vars(report).values()):
            logger.warning("recovered the vector store after an interrupted ingest: %s", report)
        return report

    # ---- reads -------------------------------------------------------------------------------------------

    async def documents(self) -> list[dict[str, Any]]:
        """OPEA's entries (name, id, type, parent), with each document's chunk count (its newest version's)."""
        def run() -> dict[str, int]:
            per_version = Counter((m["source"], m.get("started", 0), m.get("ingest", ""))
                                  for _, m in self._pages(COMMITTED))
            counts: dict[str, tuple[tuple[float, str], int]] = {}
            for (name, started, ingest), chunks in per_version.items():
                if name not in counts or (started, ingest) > counts[name][0]:
                    counts[name] = ((started, ingest), chunks)
            return {name: chunks for name, (_, chunks) in counts.items()}

        counts = await asyncio.to_thread(run)
        return [{"name": name, "id": name, "type": "File", "parent": "", "chunks": counts[name]}
                for name in sorted(counts)]

    async def has(self, name: str) -> bool:
        found = await asyncio.to_thread(self.collection.get, where={"$and": [{"source": name}, COMMITTED]}, limit=1,
                                        include=[])
        return bool(found["ids"])

    async def count(self) -> int:
        return await asyncio.to_thread(self.collection.count)

    def _nearest(self, vector: list[float], n: int, embeddings: bool = False) -> list[Hit]:
        """The n committed chunks nearest to `vector`. Chroma filters a query by metadata by first listing every
        chunk that passes (72 ms a query at 20,000 chunks on a 2-core AVX2 EPYC, 2.5 ms unfiltered), so the query
        is unfiltered, with room for uncommitted chunks of ingests in flight, which are dropped here; only if they
        crowd out the nearest committed ones does it fetch more, and in the end let Chroma filter."""
        include = ["metadatas", "documents", "distances", *(["embeddings"] if embeddings else [])]
        fetch = n + OVERFETCH
        while True:
            where = COMMITTED if fetch > FILTER_FROM else None
            found = self.collection.query(query_embeddings=[vector], n_results=n if where else fetch, where=where,
                                          include=include)
            vectors = found["embeddings"][0] if embeddings else [None] * len(found["ids"][0])
            rows = [Hit(Document(text, metadata=metadata, id=chunk_id), 1.0 - distance, vector)  # cosine distance
                    for chunk_id, text, metadata, distance, vector in zip(
                        found["ids"][0], found["documents"][0], found["metadatas"][0], found["distances"][0], vectors,
                        strict=True)]
            hits = [hit for hit in rows if hit.document.metadata.get("committed")]
            if where is not None or len(hits) >= n or len(rows) < fetch:
                return hits[:n]
            fetch *= 8

    async def search(self, vector: list[float], k: int, search: Search | None = None) -> list[tuple[Document, float]]:
        """The k best committed chunks with their cosine similarity, by OPEA's search types."""
        search = search or Search()
        if search.type == "mmr":
            def run() -> list[tuple[Document, float]]:
                candidates = self._nearest(vector, max(search.fetch_k, k), embeddings=True)
                if not candidates:
                    return []
                chosen = maximal_marginal_relevance(np.array(vector, dtype=np.float32),
                                                    [hit.embedding for hit in candidates], k=k,
                                                    lambda_mult=search.lambda_mult)
                return [(candidates[i].document, candidates[i].score) for i in chosen]

            return await asyncio.to_thread(run)
        hits = [(hit.document, hit.score) for hit in await asyncio.to_thread(self._nearest, vector, k)]
        if search.type == "similarity_score_threshold":
            hits = [(doc, score) for doc, score in hits if score >= search.score_threshold]
        elif search.type == "similarity_distance_threshold":
            hits = [(doc, score) for doc, score in hits if 1.0 - score <= search.distance_threshold]
        return hits

    async def healthy(self) -> tuple[bool, str]:
        try:
            await asyncio.to_thread(self.client.heartbeat)
            return True, f"{self.location.mode} ({await self.count()} chunks)"
        except Exception as error:
            return False, f"vector store unreachable: {type(error).__name__}"
