"""Whole-or-absent documents in a real embedded Chroma store. A fixed fake embedding stands in for the embedding
service, and the states a crash leaves (a document's chunks partly stored, a commit half done, two committed
versions, chunks from before commit markers) are written directly: a real kill (system/test_ingest_guarantees.py)
cannot choose the moment it lands. The store's start-up pass is what repairs them."""

from __future__ import annotations

import asyncio
import time

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from microservices.gateway.store import DocumentStore, Search, StoreLocation


@pytest.fixture
def store(tmp_path):
    return DocumentStore(StoreLocation("chatqna", data_dir=tmp_path), DeterministicFakeEmbedding(size=8),
                         embed_batch_size=2)


def write(store: DocumentStore, name: str, ingest: str, started: int, chunks: list[tuple[bool, int | None]],
          content_hash: str = "h") -> None:
    """Chunks as an ingest leaves them: (committed, total) each."""
    store.collection.upsert(
        ids=[f"{ingest}-{i}" for i in range(len(chunks))],
        embeddings=[[float(i + 1)] * 8 for i in range(len(chunks))],
        documents=[f"{name} chunk {i} of {ingest}" for i in range(len(chunks))],
        metadatas=[{"source": name, "content_hash": content_hash, "chunk": i, "page": 0, "ingest": ingest,
                    "started": started, "committed": committed, **({"total": total} if total else {})}
                   for i, (committed, total) in enumerate(chunks)],
    )


def listed(store: DocumentStore) -> dict[str, int]:
    return {d["name"]: d["chunks"] for d in asyncio.run(store.documents())}


def searched(store: DocumentStore) -> set[str]:
    return {doc.metadata["ingest"] for doc, _ in asyncio.run(store.search([1.0] * 8, 50))}


async def chunks(texts: list[str]):
    for text in texts:
        yield Document(text)


def test_uncommitted_chunks_are_invisible_and_a_restart_removes_them(store):
    write(store, "partial.txt", "a", 1, [(False, None)] * 3)
    assert listed(store) == {} and searched(store) == set() and not asyncio.run(store.has("partial.txt"))
    report = store.recover(None)
    assert report.removed == 3 and store.collection.count() == 0


def test_a_half_done_commit_is_finished(store):
    write(store, "doc.txt", "a", 1, [(True, 4), (True, 4), (False, None), (False, None)])
    assert store.recover(None).finished == 2
    assert listed(store) == {"doc.txt": 4} and searched(store) == {"a"}


def test_a_commit_with_chunks_missing_is_removed(store):
    write(store, "doc.txt", "a", 1, [(True, 5), (False, None), (False, None)])  # two chunks never stored
    assert store.recover(None).removed == 3 and listed(store) == {}


def test_of_two_committed_versions_the_newest_is_kept(store):
    write(store, "doc.txt", "old", 1, [(True, 3)] * 3)
    write(store, "doc.txt", "new", 2, [(True, 2)] * 2)
    assert listed(store) == {"doc.txt": 2}  # the listing counts the newest already
    assert store.recover(None).superseded == 3
    assert searched(store) == {"new"}


def test_chunks_from_before_the_markers_stay_visible(store):
    store.collection.upsert(ids=["x-0", "x-1"], embeddings=[[1.0] * 8, [2.0] * 8], documents=["a", "b"],
                            metadatas=[{"source": "old.txt", "content_hash": "h", "chunk": i, "page": 0}
                                       for i in range(2)])
    assert store.recover(None).migrated == 2
    assert listed(store) == {"old.txt": 2} and searched(store) == {"legacy"}
    result = asyncio.run(store.ingest("old.txt", "h", chunks(["a", "b"])))
    assert (result.status, result.chunks) == ("unchanged", 2)


def test_a_shared_server_keeps_young_uncommitted_chunks_of_other_replicas(store):
    now = time.time()
    write(store, "theirs.txt", "young", int(now * 1e6), [(False, None)] * 2)
    write(store, "stale.txt", "old", int((now - 7200) * 1e6), [(False, None)] * 2)
    report = store.recover(now - 3600)
    assert report.removed == 2
    assert {m["ingest"] for m in store.collection.get(include=["metadatas"])["metadatas"]} == {"young"}


def test_ingest_commits_replaces_and_answers_unchanged(store):
    first = asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two", "three"])))
    assert (first.status, first.chunks) == ("ingested", 3)
    metadatas = store.collection.get(include=["metadatas"])["metadatas"]
    assert all(m["committed"] and m["total"] == 3 for m in metadatas)
    assert asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two", "three"]))).status == "unchanged"
    second = asyncio.run(store.ingest("doc.txt", "v2", chunks(["four"])))
    assert (second.status, second.chunks) == ("replaced", 1)
    assert listed(store) == {"doc.txt": 1} and store.collection.count() == 1


def test_concurrent_ingests_of_one_name_end_with_one_version(store):
    async def both():
        return await asyncio.gather(store.ingest("doc.txt", "v1", chunks([f"a{i}" for i in range(9)])),
                                    store.ingest("doc.txt", "v2", chunks([f"b{i}" for i in range(5)])))

    results = asyncio.run(both())
    assert [r.status for r in results] == ["ingested", "replaced"]
    assert listed(store) == {"doc.txt": 5} and store.collection.count() == 5


def test_a_failed_ingest_leaves_the_previous_version(store):
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two"])))

    async def failing():
        yield Document("three")
        yield Document("four")
        yield Document("five")
        raise RuntimeError("the embedding service went away")

    with pytest.raises(RuntimeError):
        asyncio.run(store.ingest("doc.txt", "v2", failing()))
    assert listed(store) == {"doc.txt": 2} and store.collection.count() == 2


def test_delete_waits_for_an_ingest_of_the_name(store):
    async def scenario() -> int:
        ingest = asyncio.create_task(store.ingest("doc.txt", "v1", chunks([f"c{i}" for i in range(6)])))
        await asyncio.sleep(0)
        deleted = await store.delete("doc.txt")
        await ingest
        return deleted

    assert asyncio.run(scenario()) == 6 and store.collection.count() == 0


@pytest.mark.parametrize("pending", [40, 1100])  # a few: fetched past them; very many: Chroma filters instead
@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
def test_search_finds_committed_chunks_behind_uncommitted_nearer_ones(store, pending, search_type):
    query = [1.0] + [0.0] * 7
    # Each pending chunk a little apart from the query (and from the others) but nearer than either committed one:
    # a thousand identical vectors would be a degenerate graph for Chroma's approximate (HNSW) search, which then
    # misses neighbours now and then, whatever the store does.
    nearer = [[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.01 * (i + 1) / pending, 0.01 * (pending - i) / pending]
              for i in range(pending)]
    store.collection.upsert(
        ids=[f"p-{i}" for i in range(pending)], embeddings=nearer, documents=["pending"] * pending,
        metadatas=[{"source": "new.txt", "ingest": "p", "started": 2, "committed": False}] * pending)
    store.collection.upsert(
        ids=["c-0", "c-1"], embeddings=[[1.0, 0.5] + [0.0] * 6, [1.0, 0.0, 0.8] + [0.0] * 5],
        documents=["first", "second"],
        metadatas=[{"source": "old.txt", "ingest": "c", "started": 1, "committed": True, "total": 2}] * 2)
    hits = asyncio.run(store.search(query, 2, Search(type=search_type)))
    assert sorted(doc.page_content for doc, _ in hits) == ["first", "second"]
    assert all(0 < score < 1 for _, score in hits)


# Past SQLite's 32,766 variables in one statement, Chroma fails a get of that many chunks' metadata ("too many SQL
# variables"); every read and delete of many chunks goes a page at a time.
PAST_ONE_STATEMENT = 33_000


def test_a_document_of_more_chunks_than_one_statement_reads_is_listed_and_replaced(store):
    # Written directly, as an ingest commits them (an ingest of as many chunks would take a minute here).
    for start in range(0, PAST_ONE_STATEMENT, 5000):
        count = min(5000, PAST_ONE_STATEMENT - start)
        store.collection.upsert(
            ids=[f"old-{start + i}" for i in range(count)], embeddings=[[1.0] * 8] * count,
            documents=[f"chunk {start + i}" for i in range(count)],
            metadatas=[{"source": "big.txt", "content_hash": "v1", "chunk": start + i, "page": 0, "ingest": "old",
                        "started": 1, "committed": True, "total": PAST_ONE_STATEMENT} for i in range(count)])
    assert listed(store) == {"big.txt": PAST_ONE_STATEMENT}
    replaced = asyncio.run(store.ingest("big.txt", "v2", chunks(["new one", "new two"])))  # the old version read
    assert (replaced.status, replaced.chunks) == ("replaced", 2)                              # and deleted
    assert listed(store) == {"big.txt": 2} and store.collection.count() == 2


def test_an_ingest_that_fails_after_its_commit_leaves_the_previous_version(store):
    """The last step, reading which versions the new one replaces, fails (the store became unreachable): the
    request fails, and the new version, although committed, is removed rather than left beside the old one."""
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two"])))
    committed = store._committed
    calls = []

    def unreachable_on_the_second_read(name):
        calls.append(name)
        if len(calls) == 2:  # the first is the "unchanged" check
            raise ConnectionError("the vector store went away")
        return committed(name)

    store._committed = unreachable_on_the_second_read
    with pytest.raises(ConnectionError):
        asyncio.run(store.ingest("doc.txt", "v2", chunks(["three", "four", "five"])))
    store._committed = committed
    assert listed(store) == {"doc.txt": 2} and store.collection.count() == 2
    assert searched(store) == {next(iter(store._committed("doc.txt")))}


def test_a_cancelled_ingest_leaves_the_previous_version(store):
    """Cancelled (its client gone) while its chunks are embedded: nothing of it stays, whichever call it was in."""
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two"])))
    calls: list[list[str]] = []
    hanging = asyncio.Event()
    embed = store.embeddings.aembed_documents

    async def hang_after_the_first_batch(texts):
        calls.append(texts)
        if len(calls) > 1:  # the embedding service is slow: the client leaves meanwhile
            hanging.set()
            await asyncio.Event().wait()
        return await embed(texts)

    store.embeddings = type("Slow", (), {"aembed_documents": staticmethod(hang_after_the_first_batch)})()

    async def scenario() -> None:
        ingest = asyncio.create_task(store.ingest("doc.txt", "v2", chunks([f"c{i}" for i in range(6)])))
        await hanging.wait()  # the first batch is stored (uncommitted), the second one's embedding under way
        ingest.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ingest

    asyncio.run(scenario())
    assert listed(store) == {"doc.txt": 2} and store.collection.count() == 2
