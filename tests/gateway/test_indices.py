"""The indices on a real embedded Chroma under tmp_path: names checked by Chroma's rule, the default index always
there, another made by its first ingest within MAX_INDICES and dropped with its documents, an index made or dropped
by another replica met as it is now, and the start-up pass over every index."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import APIError
from ovgenai_services.gateway.chroma import StoreLocation
from ovgenai_services.gateway.indices import Indices, checked
from ovgenai_services.gateway.store import DocumentStore


@pytest.fixture
def indices(tmp_path) -> Indices:
    # No embedding here: chunks are put in place as the store writes them.
    return Indices("chatqna", 3, lambda name: DocumentStore(StoreLocation(name, data_dir=tmp_path), None, 8))


def put(store: DocumentStore, name: str, committed: bool = True) -> None:
    metadata = {"source": name, "content_hash": "h", "chunk": 0, "page": 0, "ingest": "i1", "started": 1,
                "committed": committed, **({"total": 1} if committed else {})}
    store.chunks.upsert([f"{name}-0"], [[1.0, 0.0]], ["text"], [metadata])


@pytest.mark.parametrize("name", ["abc", "Team-2024", "a.b_c", "x" * 63])
def test_a_name_of_chroma_s_rule_is_taken(name):
    assert checked(name) == name


@pytest.mark.parametrize("name", ["ab", "x" * 64, "has space", "-lead", "trail.", "slash/name", "all", ""])
def test_any_other_name_is_a_400_naming_the_field(name):
    with pytest.raises(APIError) as refused:
        checked(name)
    assert (refused.value.status, refused.value.param) == (400, "index_name")


async def test_the_default_index_is_always_there_and_another_is_a_404_until_made(indices):
    assert indices.names() == ["chatqna"]
    assert await indices.get(None) is indices.default and await indices.get("chatqna") is indices.default
    with pytest.raises(APIError) as missing:
        await indices.get("team")
    assert missing.value.status == 404 and "'team'" in missing.value.message
    assert await indices.find("team") is None
    async with indices.writing("team") as store:
        assert store.location.collection == "team"
    assert indices.names() == ["chatqna", "team"] and await indices.get("team") is store


async def test_no_more_indices_are_made_than_max_indices(indices):
    for name in ("one", "two"):
        async with indices.writing(name):
            pass
    with pytest.raises(APIError) as refused:
        async with indices.writing("three"):
            pass
    assert refused.value.status == 409 and "MAX_INDICES" in refused.value.message
    assert indices.names() == ["chatqna", "one", "two"]
    async with indices.writing("two"):  # an index that exists takes ingests
        pass


async def test_an_index_is_dropped_with_its_documents_but_the_default_is_only_emptied(indices):
    async with indices.writing("team") as team:
        put(team, "a.txt")
    put(indices.default, "b.txt")
    assert await indices.drop(team) == 1
    assert indices.names() == ["chatqna"] and await indices.find("team") is None
    assert await indices.drop(indices.default) == 1
    assert indices.names() == ["chatqna"] and await indices.default.count() == 0


async def test_an_index_being_ingested_into_is_not_dropped(indices):
    async with indices.writing("team") as team:
        with pytest.raises(APIError) as refused:
            await indices.drop(team)
        assert refused.value.status == 409
    assert await indices.drop(team) == 0


async def test_an_index_dropped_or_made_again_elsewhere_is_met_as_it_is_now(indices):
    async with indices.writing("team") as team:
        put(team, "a.txt")
    indices.client.delete_collection("team")  # another replica drops it ...
    assert await indices.find("team") is None
    indices.client.create_collection("team", metadata={"hnsw:space": "cosine"})  # ... and makes it again
    again = await indices.get("team")
    assert again is not team and await again.count() == 0


async def test_the_start_up_pass_repairs_every_index(indices):
    async with indices.writing("team") as team:
        put(team, "half.txt", committed=False)  # a crash left it uncommitted
    put(indices.default, "whole.txt")
    indices.recover(None)
    assert await team.count() == 0 and await indices.default.count() == 1
