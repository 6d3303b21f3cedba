"""The document store at SQLite's limit: a document of more chunks than one statement may name (Chroma reads a
selection in one statement, which fails past 32,766 variables) is listed and replaced, on a real embedded Chroma.
The page-at-a-time mechanism itself is unit-tested in tests/gateway/test_store.py."""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from ovgenai_services.gateway.chroma import StoreLocation
from ovgenai_services.gateway.embedding import Embedder, VectorSpace
from ovgenai_services.gateway.store import DocumentStore

PAST_ONE_STATEMENT = 33_000


async def chunks(texts: list[str]):
    for text in texts:
        yield Document(text)


def test_a_document_of_more_chunks_than_one_statement_reads_is_listed_and_replaced(tmp_path):
    store = DocumentStore(StoreLocation("chatqna", data_dir=tmp_path),
                          Embedder(DeterministicFakeEmbedding(size=8), VectorSpace("fake")), embed_batch_size=2)
    # Written directly, as an ingest commits them (an ingest of as many chunks would take minutes).
    for start in range(0, PAST_ONE_STATEMENT, 5000):
        count = min(5000, PAST_ONE_STATEMENT - start)
        store.chunks.collection.upsert(
            ids=[f"old-{start + i}" for i in range(count)], embeddings=[[1.0] * 8] * count,
            documents=[f"chunk {start + i}" for i in range(count)],
            metadatas=[{"source": "big.txt", "content_hash": "v1", "chunk": start + i, "page": 0, "ingest": "old",
                        "started": 1, "committed": True, "total": PAST_ONE_STATEMENT} for i in range(count)])
    listed = {d["name"]: d["chunks"] for d in asyncio.run(store.documents())}
    assert listed == {"big.txt": PAST_ONE_STATEMENT}
    replaced = asyncio.run(store.ingest("big.txt", "v2", chunks(["new one", "new two"])))
    assert (replaced.status, replaced.chunks) == ("replaced", 2)
    assert store.chunks.collection.count() == 2
