"""The Chroma adapter on a real embedded collection: reads, changes and deletes a page at a time (pages of 3
here), the nearest chunks that match a filter found behind nearer ones that do not, and the collection's own
metadata read as stored and added to without its distance."""

from __future__ import annotations

import pytest

from ovgenai_services.gateway import chroma
from ovgenai_services.gateway.chroma import Chunks, StoreLocation


@pytest.fixture
def chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(chroma, "BATCH", 3)
    return Chunks(StoreLocation("chatqna", data_dir=tmp_path))


def fill(chunks: Chunks, count: int, **metadata) -> None:
    chunks.upsert([f"c-{i}" for i in range(count)], [[1.0, float(i)] for i in range(count)],
                  [f"chunk {i}" for i in range(count)], [{"i": i, **metadata} for i in range(count)])


def test_every_chunk_is_read_and_deleted_across_pages(chunks):
    fill(chunks, 10, source="doc.txt")
    assert [metadata["i"] for _, metadata in chunks.pages()] == list(range(10))
    assert [metadata for _, metadata in chunks.pages(include=())] == [{}] * 10
    assert chunks.ids({"source": "doc.txt"}) == [f"c-{i}" for i in range(10)]
    assert chunks.delete({"source": "doc.txt"}) == 10 and chunks.count() == 0


def test_update_changes_metadata_across_pages(chunks):
    fill(chunks, 7, source="doc.txt")
    chunks.update(chunks.ids({"source": "doc.txt"}), lambda metadata: {**metadata, "seen": True})
    assert all(metadata["seen"] for _, metadata in chunks.pages())
    assert chunks.exists({"seen": True}) and not chunks.exists({"source": "other.txt"})


@pytest.mark.parametrize("embeddings", [False, True])
def test_nearest_skips_what_does_not_match(chunks, embeddings):
    near = [[1.0, 0.001 * i] for i in range(40)]
    chunks.upsert([f"p-{i}" for i in range(40)], near, ["skipped"] * 40, [{"keep": False}] * 40)
    chunks.upsert(["k-0", "k-1"], [[1.0, 1.0], [0.5, 1.0]], ["first", "second"], [{"keep": True}] * 2)
    hits = chunks.nearest([1.0, 0.0], 2, {"keep": True}, embeddings=embeddings)
    assert [hit.document.page_content for hit in hits] == ["first", "second"]
    assert hits[0].score > hits[1].score and all(0 < hit.score < 1 for hit in hits)
    assert (hits[0].embedding is not None) is embeddings


def test_health_reaches_the_client(chunks):
    chunks.heartbeat()
    assert chunks.count() == 0


def test_the_collection_s_metadata_is_added_to_as_stored_and_keeps_its_cosine_distance(chunks, tmp_path):
    assert chunks.metadata() == {"hnsw:space": "cosine"}
    chunks.annotate({"embedding_model": "a"})
    elsewhere = Chunks(StoreLocation("chatqna", data_dir=tmp_path))  # another client of the same store
    elsewhere.annotate({"note": "b"})
    assert chunks.metadata() == {"embedding_model": "a", "note": "b"}  # read as stored, not as first opened
    fill(chunks, 2)
    assert chunks.nearest([1.0, 0.0], 1, {})[0].score == pytest.approx(1.0)  # still cosine similarity
