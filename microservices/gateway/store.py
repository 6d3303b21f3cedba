"""The document store: a LangChain Chroma vector store, embedded (persisted under data_dir) or a Chroma server.

Chroma is the choice because both of its modes are real and testable here: `chromadb.PersistentClient` embeds
the store in the gateway's process with durable files, and the same package ships `chroma run`, a server the
tests start on loopback for the scale-out mode. Telemetry is switched off in both.

Every chunk carries its document's name and a hash of its content and chunking. Re-ingesting a document adds the
new chunks first and deletes the old ones only after all new ones are stored, so a failed re-ingest leaves the
previous version intact; a failed first ingest removes whatever it had added.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from .settings import GatewaySettings

logger = logging.getLogger(__name__)


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


def make_client(settings: GatewaySettings):
    import chromadb
    from chromadb.config import Settings

    chroma_settings = Settings(anonymized_telemetry=False)
    if settings.vector_store == "server":
        return chromadb.HttpClient(host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings)
    path = Path(settings.data_dir) / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


class DocumentStore:
    def __init__(self, settings: GatewaySettings, embeddings: Embeddings):
        from langchain_chroma import Chroma

        self.settings = settings
        self.embeddings = embeddings
        self.client = make_client(settings)
        self.store = Chroma(
            collection_name=settings.collection,
            embedding_function=embeddings,
            client=self.client,
            collection_metadata={"hnsw:space": "cosine"},
        )

    # ---- writes ------------------------------------------------------------------------------------------

    def _chunks_of(self, name: str) -> dict[str, Any]:
        return self.store.get(where={"source": name}, include=["metadatas"])

    async def ingest(self, name: str, content_hash: str, chunks: AsyncIterator[Document]) -> IngestResult:
        existing = await asyncio.to_thread(self._chunks_of, name)
        old_ids = existing["ids"]
        if old_ids and all(m.get("content_hash") == content_hash for m in existing["metadatas"]):
            return IngestResult(name, len(old_ids), "unchanged")
        prefix = hashlib.sha256(f"{name}\0{content_hash}".encode()).hexdigest()[:16]
        added: list[str] = []
        batch: list[Document] = []
        try:
            async for chunk in chunks:
                batch.append(chunk)
                if len(batch) >= self.settings.embed_batch_size:
                    added += await self._add(batch, name, content_hash, prefix, len(added))
                    batch = []
            if batch:
                added += await self._add(batch, name, content_hash, prefix, len(added))
        except BaseException:
            if added:
                await asyncio.to_thread(self.store.delete, added)
            raise
        stale = [i for i in old_ids if i not in set(added)]
        if stale:
            await asyncio.to_thread(self.store.delete, stale)
        return IngestResult(name, len(added), "replaced" if old_ids else "ingested")

    async def _add(self, batch: list[Document], name: str, content_hash: str, prefix: str, start: int) -> list[str]:
        texts = [d.page_content for d in batch]
        vectors = await self.embeddings.aembed_documents(texts)  # fails before anything is written
        ids = [f"{prefix}-{start + i}" for i in range(len(batch))]
        metadatas = [
            {"source": name, "content_hash": content_hash, "chunk": start + i, "page": d.metadata.get("page", 0)}
            for i, d in enumerate(batch)
        ]
        # Private attribute: LangChain's Chroma has no public way to add vectors computed beforehand (computing them
        # first is what lets a failed embedding call leave nothing behind).
        collection = self.store._collection
        await asyncio.to_thread(collection.upsert, ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)
        return ids

    async def delete(self, name: str | None) -> int:
        def run() -> int:
            found = self.store.get(where={"source": name} if name else None, include=[])
            if found["ids"]:
                self.store.delete(found["ids"])
            return len(found["ids"])

        return await asyncio.to_thread(run)

    # ---- reads -------------------------------------------------------------------------------------------

    async def documents(self) -> list[dict[str, Any]]:
        """OPEA's entries (name, id, type, parent), with each document's chunk count."""
        found = await asyncio.to_thread(self.store.get, include=["metadatas"])
        counts = Counter(metadata["source"] for metadata in found["metadatas"])
        return [{"name": name, "id": name, "type": "File", "parent": "", "chunks": counts[name]}
                for name in sorted(counts)]

    async def has(self, name: str) -> bool:
        found = await asyncio.to_thread(self.store.get, where={"source": name}, limit=1, include=[])
        return bool(found["ids"])

    async def count(self) -> int:
        return await asyncio.to_thread(self.store._collection.count)  # private: LangChain's Chroma has no count

    async def search(self, vector: list[float], k: int, search: Search | None = None) -> list[tuple[Document, float]]:
        """The k best chunks with their cosine similarity, by OPEA's search types."""
        search = search or Search()

        def scored(n: int) -> list[tuple[Document, float]]:
            pairs = self.store.similarity_search_by_vector_with_relevance_scores(vector, n)
            return [(doc, 1.0 - distance) for doc, distance in pairs]  # cosine distance -> similarity

        if search.type == "mmr":
            fetch_k = max(search.fetch_k, k)

            def run() -> list[tuple[Document, float]]:
                chosen = self.store.max_marginal_relevance_search_by_vector(
                    vector, k=k, fetch_k=fetch_k, lambda_mult=search.lambda_mult)
                similarity = {doc.id: score for doc, score in scored(fetch_k)}
                return [(doc, similarity.get(doc.id, 0.0)) for doc in chosen]

            return await asyncio.to_thread(run)
        hits = await asyncio.to_thread(scored, k)
        if search.type == "similarity_score_threshold":
            hits = [(doc, score) for doc, score in hits if score >= search.score_threshold]
        elif search.type == "similarity_distance_threshold":
            hits = [(doc, score) for doc, score in hits if 1.0 - score <= search.distance_threshold]
        return hits

    async def healthy(self) -> tuple[bool, str]:
        try:
            await asyncio.to_thread(self.client.heartbeat)
            return True, f"{self.settings.vector_store} ({await self.count()} chunks)"
        except Exception as error:
            return False, f"vector store unreachable: {type(error).__name__}"
