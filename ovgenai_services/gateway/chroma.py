"""The Chroma adapter: where the collection lives, and its chunks read, changed and searched a page at a time.

Chroma is the choice because both of its modes are real and testable here: `chromadb.PersistentClient` embeds
the store in the gateway's process with durable files, and the same package ships `chroma run`, a server the
tests start on loopback for the scale-out mode. Telemetry is switched off in both. Every read or delete that can
touch many chunks goes a page of BATCH at a time: Chroma reads a selection's metadata in one SQLite statement,
which fails past 32,766 chunks ("too many SQL variables").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document

# Chunks read, changed or deleted per call to Chroma (below its own maximum batch size, and far below SQLite's
# 32,766 variables per statement).
BATCH = 1000
# Neighbours fetched beyond those asked for, so that chunks a search must skip can be dropped; and how many to
# fetch at most before letting Chroma filter instead (see `Chunks.nearest`).
OVERFETCH = 16
FILTER_FROM = 1024


@dataclass(frozen=True)
class StoreLocation:
    """Where the chunks live: VECTOR_STORE=embedded under DATA_DIR, or =server at CHROMA_HOST:CHROMA_PORT; and
    the collection (COLLECTION_NAME)."""

    collection: str
    mode: Literal["embedded", "server"] = "embedded"
    data_dir: Path = Path("data/gateway")
    host: str = "localhost"
    port: int = 8000


@dataclass
class Hit:
    document: Document
    score: float  # cosine similarity
    embedding: Any = None


def make_client(location: StoreLocation):
    import chromadb
    from chromadb.config import Settings

    chroma_settings = Settings(anonymized_telemetry=False)
    if location.mode == "server":
        return chromadb.HttpClient(host=location.host, port=location.port, settings=chroma_settings)
    path = Path(location.data_dir) / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


class Chunks:
    """The collection's chunks. chromadb's own API: vectors are computed beforehand (so a failed embedding call
    writes nothing), and metadata is changed in place."""

    def __init__(self, location: StoreLocation):
        self.location = location
        self.client = make_client(location)
        self.collection = self.client.get_or_create_collection(
            location.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None)

    def pages(self, where: dict[str, Any] | None = None,
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

    def ids(self, where: dict[str, Any]) -> list[str]:
        return [chunk_id for chunk_id, _ in self.pages(where, include=())]

    def delete(self, where: dict[str, Any]) -> int:
        ids = self.ids(where)  # every page read before any is deleted: deleting would shift the pages
        for start in range(0, len(ids), BATCH):
            self.collection.delete(ids=ids[start:start + BATCH])
        return len(ids)

    def update(self, ids: list[str], change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Each chunk's metadata replaced by `change` of it, a page at a time."""
        for start in range(0, len(ids), BATCH):
            batch = self.collection.get(ids=ids[start:start + BATCH], include=["metadatas"])
            self.collection.update(ids=batch["ids"], metadatas=[change(metadata) for metadata in batch["metadatas"]])

    def upsert(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        self.collection.upsert(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)

    def exists(self, where: dict[str, Any]) -> bool:
        """Whether any chunk matches `where`."""
        return bool(self.collection.get(where=where, limit=1, include=[])["ids"])

    def count(self) -> int:
        return self.collection.count()

    def metadata(self) -> dict[str, Any]:
        """The collection's metadata as stored now (another replica may have changed it since this one opened it)."""
        collection = self.client.get_collection(self.location.collection, embedding_function=None)
        return dict(collection.metadata or {})

    def annotate(self, values: dict[str, Any]) -> None:
        """`values` added to the collection's metadata. Chroma replaces the metadata whole and refuses a distance
        in it once the collection exists (it keeps that in the collection's configuration)."""
        kept = {key: value for key, value in self.metadata().items() if not key.startswith("hnsw:")}
        self.collection.modify(metadata={**kept, **values})

    def heartbeat(self) -> None:
        self.client.heartbeat()

    def nearest(self, vector: list[float], n: int, only: dict[str, Any],
                embeddings: bool = False) -> list[Hit]:
        """The n chunks nearest to `vector` whose metadata has the values of `only`. Chroma filters a query by
        metadata by first listing every chunk that passes (slow on large collections, against an unfiltered query's
        milliseconds), so the query is unfiltered, with room for chunks to skip, which are dropped here; only if
        they crowd out the nearest wanted ones does it fetch more, and in the end let Chroma filter."""
        include = ["metadatas", "documents", "distances", *(["embeddings"] if embeddings else [])]
        fetch = n + OVERFETCH
        while True:
            where = only if fetch > FILTER_FROM else None
            found = self.collection.query(query_embeddings=[vector], n_results=n if where else fetch, where=where,
                                          include=include)
            vectors = found["embeddings"][0] if embeddings else [None] * len(found["ids"][0])
            rows = [Hit(Document(text, metadata=metadata, id=chunk_id), 1.0 - distance, vector)  # cosine distance
                    for chunk_id, text, metadata, distance, vector in zip(
                        found["ids"][0], found["documents"][0], found["metadatas"][0], found["distances"][0], vectors,
                        strict=True)]
            hits = [hit for hit in rows if all(hit.document.metadata.get(k) == v for k, v in only.items())]
            if where is not None or len(hits) >= n or len(rows) < fetch:
                return hits[:n]
            fetch *= 8
