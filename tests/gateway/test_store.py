"""The document store on a real embedded Chroma, a fixed fake embedding standing in for the embedding service:
an ingest commits, replaces and answers unchanged; one that fails, is cancelled or fails after its commit leaves
the previous version; concurrent ingests of one name end with one version; a delete waits for an ingest of the
name; searches see committed chunks only; the index records the vector space it was embedded in, refuses another
and adopts it where it records none or holds nothing. The start-up pass's repairs: test_versions.py."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.gateway import chroma, versions
from ovgenai_services.gateway.chroma import StoreLocation
from ovgenai_services.gateway.embedding import Embedder, VectorSpace
from ovgenai_services.gateway.store import DocumentStore, NameLocks, Search, _finish
from tests.support.waiting import settle, until


class FakeEmbeddings(DeterministicFakeEmbedding):
    """Takes the request fields OpenAIEmbeddings sends on (extra_body), as the embedding service would."""

    async def aembed_documents(self, texts: list[str], **_fields) -> list[list[float]]:
        return await super().aembed_documents(texts)

    async def aembed_query(self, text: str, **_fields) -> list[float]:
        return await super().aembed_query(text)


def store_in(folder, space: VectorSpace, prompts: str | None = None) -> DocumentStore:
    """`prompts`: what the embedding service says it puts before texts (None: it does not say)."""
    async def said() -> str | None:
        return prompts

    return DocumentStore(StoreLocation("chatqna", data_dir=folder), Embedder(FakeEmbeddings(size=8), space, said),
                         embed_batch_size=2)


@pytest.fixture
def store(tmp_path):
    return store_in(tmp_path, VectorSpace("fake"))


def listed(store: DocumentStore) -> dict[str, int]:
    return {d["name"]: d["chunks"] for d in asyncio.run(store.documents())}


def searched(store: DocumentStore) -> set[str]:
    return {doc.metadata["ingest"] for doc, _ in asyncio.run(store.search([1.0] * 8, 50))}


async def chunks(texts: list[str]):
    for text in texts:
        yield Document(text)


def test_ingest_commits_replaces_and_answers_unchanged(store):
    first = asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two", "three"])))
    assert (first.status, first.chunks) == ("ingested", 3)
    metadatas = store.chunks.collection.get(include=["metadatas"])["metadatas"]
    assert all(m["committed"] and m["total"] == 3 for m in metadatas)
    assert asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two", "three"]))).status == "unchanged"
    second = asyncio.run(store.ingest("doc.txt", "v2", chunks(["four"])))
    assert (second.status, second.chunks) == ("replaced", 1)
    assert listed(store) == {"doc.txt": 1} and store.chunks.collection.count() == 1


def test_concurrent_ingests_of_one_name_end_with_one_version(store):
    async def both():
        return await asyncio.gather(store.ingest("doc.txt", "v1", chunks([f"a{i}" for i in range(9)])),
                                    store.ingest("doc.txt", "v2", chunks([f"b{i}" for i in range(5)])))

    results = asyncio.run(both())
    assert [r.status for r in results] == ["ingested", "replaced"]
    assert listed(store) == {"doc.txt": 5} and store.chunks.collection.count() == 5


def test_a_failed_ingest_leaves_the_previous_version(store):
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two"])))

    async def failing():
        yield Document("three")
        yield Document("four")
        yield Document("five")
        raise RuntimeError("the embedding service went away")

    with pytest.raises(RuntimeError):
        asyncio.run(store.ingest("doc.txt", "v2", failing()))
    assert listed(store) == {"doc.txt": 2} and store.chunks.collection.count() == 2


def test_delete_waits_for_an_ingest_of_the_name(store):
    async def scenario() -> int:
        ingest = asyncio.create_task(store.ingest("doc.txt", "v1", chunks([f"c{i}" for i in range(6)])))
        await asyncio.sleep(0)
        deleted = await store.delete("doc.txt")
        await ingest
        return deleted

    assert asyncio.run(scenario()) == 6 and store.chunks.collection.count() == 0


@pytest.mark.parametrize("pending", [40, 1100])  # a few: fetched past them; very many: Chroma filters instead
@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
def test_search_finds_committed_chunks_behind_uncommitted_nearer_ones(store, pending, search_type):
    query = [1.0] + [0.0] * 7
    # Each pending chunk a little apart from the query (and from the others) but nearer than either committed one:
    # a thousand identical vectors would be a degenerate graph for Chroma's approximate (HNSW) search, which then
    # misses neighbours now and then, whatever the store does.
    nearer = [[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.01 * (i + 1) / pending, 0.01 * (pending - i) / pending]
              for i in range(pending)]
    store.chunks.collection.upsert(
        ids=[f"p-{i}" for i in range(pending)], embeddings=nearer, documents=["pending"] * pending,
        metadatas=[{"source": "new.txt", "ingest": "p", "started": 2, "committed": False}] * pending)
    store.chunks.collection.upsert(
        ids=["c-0", "c-1"], embeddings=[[1.0, 0.5] + [0.0] * 6, [1.0, 0.0, 0.8] + [0.0] * 5],
        documents=["first", "second"],
        metadatas=[{"source": "old.txt", "ingest": "c", "started": 1, "committed": True, "total": 2}] * 2)
    hits = asyncio.run(store.search(query, 2, Search(type=search_type)))
    assert sorted(doc.page_content for doc, _ in hits) == ["first", "second"]
    assert all(0 < score < 1 for _, score in hits)


def test_a_document_of_more_chunks_than_one_call_takes_is_read_and_replaced_a_page_at_a_time(store, monkeypatch):
    """Chroma reads a selection in one SQLite statement, which fails past 32,766 variables: every read and delete
    of many chunks goes a page (chroma.BATCH) at a time. Here a page is 10 chunks, and a call for more fails as
    SQLite would; system/test_store_scale.py writes 33,000 chunks to the real limit."""
    monkeypatch.setattr(chroma, "BATCH", 10)
    collection = store.chunks.collection
    real_get, real_delete = collection.get, collection.delete

    def bounded(call):
        def within_a_page(*args, ids=None, limit=None, **kwargs):
            if (ids is not None and len(ids) > 10) or (ids is None and (limit is None or limit > 10)):
                raise RuntimeError("too many SQL variables")
            return call(*args, ids=ids, limit=limit, **kwargs) if limit is not None else call(*args, ids=ids,
                                                                                               **kwargs)
        return within_a_page

    collection.upsert(ids=[f"old-{i}" for i in range(25)], embeddings=[[1.0] * 8] * 25,
                      documents=[f"chunk {i}" for i in range(25)],
                      metadatas=[{"source": "big.txt", "content_hash": "v1", "chunk": i, "page": 0, "ingest": "old",
                                  "started": 1, "committed": True, "total": 25} for i in range(25)])
    monkeypatch.setattr(collection, "get", bounded(real_get))
    monkeypatch.setattr(collection, "delete", bounded(real_delete))
    assert listed(store) == {"big.txt": 25}
    replaced = asyncio.run(store.ingest("big.txt", "v2", chunks(["new one", "new two"])))  # the old version read
    assert (replaced.status, replaced.chunks) == ("replaced", 2)                              # and deleted
    assert listed(store) == {"big.txt": 2} and collection.count() == 2


def test_an_ingest_that_fails_after_its_commit_leaves_the_previous_version(store, monkeypatch):
    """The last step, reading which versions the new one replaces, fails (the store became unreachable): the
    request fails, and the new version, although committed, is removed rather than left beside the old one."""
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two"])))
    committed = versions.committed
    calls = []

    def unreachable_on_the_second_read(chunks, name):
        calls.append(name)
        if len(calls) == 2:  # the first is the "unchanged" check
            raise ConnectionError("the vector store went away")
        return committed(chunks, name)

    monkeypatch.setattr(versions, "committed", unreachable_on_the_second_read)
    with pytest.raises(ConnectionError):
        asyncio.run(store.ingest("doc.txt", "v2", chunks(["three", "four", "five"])))
    monkeypatch.undo()
    assert listed(store) == {"doc.txt": 2} and store.chunks.collection.count() == 2
    assert searched(store) == {next(iter(versions.committed(store.chunks, "doc.txt")))}


def test_a_cancelled_ingest_leaves_the_previous_version(store):
    """Cancelled (its client gone) while its chunks are embedded: nothing of it stays, whichever call it was in."""
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two"])))
    calls: list[list[str]] = []
    hanging = asyncio.Event()
    embed = store.embedder.embeddings.aembed_documents

    async def hang_after_the_first_batch(texts):
        calls.append(texts)
        if len(calls) > 1:  # the embedding service is slow: the client leaves meanwhile
            hanging.set()
            await asyncio.Event().wait()
        return await embed(texts)

    store.embedder.embeddings = type("Slow", (), {"aembed_documents": staticmethod(hang_after_the_first_batch)})()

    async def scenario() -> None:
        ingest = asyncio.create_task(store.ingest("doc.txt", "v2", chunks([f"c{i}" for i in range(6)])))
        await hanging.wait()  # the first batch is stored (uncommitted), the second one's embedding under way
        ingest.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ingest

    asyncio.run(scenario())
    assert listed(store) == {"doc.txt": 2} and store.chunks.collection.count() == 2


def test_a_delete_of_every_document_deletes_each_name(store):
    for name in ("a.txt", "b.txt"):
        asyncio.run(store.ingest(name, "v1", chunks([f"{name} one", f"{name} two", f"{name} three"])))
    assert asyncio.run(store.has("a.txt")) and asyncio.run(store.count()) == 6
    assert asyncio.run(store.delete(None)) == 6 and listed(store) == {} and not asyncio.run(store.has("a.txt"))


@pytest.mark.parametrize(("search", "kept"), [
    (Search("similarity_score_threshold", score_threshold=1.01), 0),
    (Search("similarity_score_threshold", score_threshold=-1.0), 3),
    (Search("similarity_distance_threshold", distance_threshold=2.0), 3),
])
def test_thresholds_filter_by_score_and_distance(store, search, kept):
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one", "two", "three"])))
    assert len(asyncio.run(store.search([1.0] * 8, 5, search))) == kept


def test_health_names_the_mode_and_the_chunks(store):
    asyncio.run(store.ingest("doc.txt", "v1", chunks(["one"])))
    assert asyncio.run(store.healthy()) == (True, "embedded (1 chunks)")


def test_name_locks_serialize_one_name_and_are_dropped_when_free():
    locks, order = NameLocks(), []

    async def hold(name: str, tag: str) -> None:
        async with locks.hold(name):
            order.append(f"{tag} in")
            await asyncio.sleep(0.01)
            order.append(f"{tag} out")

    async def scenario() -> None:
        await asyncio.gather(hold("a", "1"), hold("a", "2"), hold("b", "3"))

    asyncio.run(scenario())
    assert order.index("1 out") < order.index("2 in") and order.index("3 in") < order.index("1 out")
    assert locks._locks == {}


def test_finish_waits_for_the_work_then_raises_the_cancellation():
    done = []

    async def scenario() -> None:
        started, written = asyncio.Event(), asyncio.Event()

        async def work() -> None:  # a write the test ends when it chooses
            started.set()
            await written.wait()
            done.append(True)

        task = asyncio.create_task(_finish(work()))
        await until(started.is_set)
        task.cancel()  # while the write runs
        await settle()
        assert not task.done()  # the cancellation waits for the write
        written.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert done == [True]  # the write ended before the cancellation reached the caller

    asyncio.run(scenario())


def test_the_index_records_its_vector_space_and_refuses_another_naming_both_models(tmp_path):
    mine = VectorSpace("minilm", {"input_type": "query"}, {"input_type": "document"})
    asyncio.run(store_in(tmp_path, mine).ingest("doc.txt", "v1", chunks(["one", "two"])))
    metadata = store_in(tmp_path, mine).chunks.metadata()
    assert metadata["embedding_model"] == "minilm"
    assert metadata["embedding_document_fields"] == '{"input_type": "document"}'
    for other in (VectorSpace("bge", mine.query, mine.document), VectorSpace("minilm", {}, mine.document)):
        elsewhere = store_in(tmp_path, other)
        for refused in (elsewhere.ingest("doc2.txt", "v1", chunks(["three"])), elsewhere.embed_query("q")):
            with pytest.raises(APIError, match="The index 'chatqna' was built with embedding model 'minilm'") as no:
                asyncio.run(refused)
            assert no.value.kind is ErrorKind.CONFLICT and no.value.status == 409
            assert f"this gateway embeds with '{other.model}'" in no.value.message
    assert listed(store_in(tmp_path, mine)) == {"doc.txt": 2}  # nothing of theirs written
    assert len(asyncio.run(store_in(tmp_path, mine).embed_query("q"))) == 8


def test_the_index_records_the_service_s_prompts_and_refuses_other_prompts(tmp_path):
    mine = VectorSpace("minilm", {"input_type": "query"}, {"input_type": "document"})
    before = store_in(tmp_path, mine)  # made when the service did not say its prompts (or before indexes kept them)
    asyncio.run(before.ingest("doc.txt", "v1", chunks(["one"])))
    said = store_in(tmp_path, mine, prompts='{"query": "query: "}')
    assert len(asyncio.run(said.embed_query("q"))) == 8  # taken, and recorded from now on
    assert said.chunks.metadata()["embedding_prompts"] == '{"query": "query: "}'
    other = store_in(tmp_path, mine, prompts='{"query": "Represent this question: "}')
    with pytest.raises(APIError, match="prompts {\"query\": \"query: \"}") as no:
        asyncio.run(other.embed_query("q"))
    assert no.value.status == 409 and 'prompts {"query": "Represent this question: "}' in no.value.message
    assert len(asyncio.run(store_in(tmp_path, mine).embed_query("q"))) == 8  # a service that does not say them


def test_an_index_without_a_record_or_without_chunks_takes_the_gateway_s_vector_space(tmp_path):
    old = store_in(tmp_path, VectorSpace("fake"))
    old.chunks.collection.modify(metadata={"made": "before records"})  # an index of an earlier version
    asyncio.run(old.ingest("doc.txt", "v1", chunks(["one"])))
    assert old.chunks.metadata() == {"made": "before records", **VectorSpace("fake").record()}
    asyncio.run(old.delete(None))  # emptied: the next gateway's space is taken
    other = store_in(tmp_path, VectorSpace("bge"))
    asyncio.run(other.ingest("doc.txt", "v1", chunks(["one", "two"])))
    assert other.chunks.metadata()["embedding_model"] == "bge" and listed(other) == {"doc.txt": 2}
    assert other.chunks.collection.configuration["hnsw"]["space"] == "cosine"  # the distance is kept
