"""The Responses store: found by id, kept for its time, within its count and bytes, a flood evicting its own; what
both services' routes answer from it, and the 404 of what it does not keep."""

from __future__ import annotations

import tracemalloc

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.response_store import CLIENT_SHARE, ResponseStore


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def response(rid: str, text: str = "") -> dict:
    return {"id": rid, "output": text}


def test_a_response_is_found_until_it_expires_or_is_deleted():
    clock = Clock()
    store = ResponseStore(10, ttl=60, clock=clock)
    store.put("a", response("r1"), [{"role": "user", "content": "hi"}])
    store.put("a", response("r2"), [])
    found = store.get("r1")
    assert found is not None and found.conversation == [{"role": "user", "content": "hi"}]
    assert store.delete("r2") and store.get("r2") is None and not store.delete("r2")
    clock.now = 61
    assert store.get("r1") is None and len(store) == 0 and store.bytes == 0


def test_past_its_size_the_heaviest_clients_oldest_goes_first():
    store = ResponseStore(3, ttl=60)
    store.put("quiet", response("q1"), [])
    for index in range(5):
        store.put("greedy", response(f"g{index}"), [])
    assert store.get("q1") is not None
    assert [rid for rid in ("g0", "g1", "g2", "g3", "g4") if store.get(rid)] == ["g3", "g4"]


def test_the_byte_budget_bounds_memory_and_a_response_larger_than_it_is_not_kept():
    store = ResponseStore(100, ttl=60, max_bytes=20_000)
    assert not store.put("a", response("huge", "x" * 20_000), [])
    for index in range(30):
        assert store.put("a", response(f"r{index}", "x" * 1000), [])
    assert store.bytes <= 20_000 * CLIENT_SHARE and store.get("r29") is not None and store.get("r0") is None


def test_a_client_keeps_at_most_its_share_and_a_flood_leaves_the_others_responses():
    store = ResponseStore(8, ttl=60)
    store.put("quiet", response("q1"), [])
    for index in range(40):
        store.put("greedy", response(f"g{index}"), [])
    assert store.get("q1") is not None and len(store) == 7  # 6 of greedy's, three quarters of 8
    assert [rid for rid in (f"g{index}" for index in range(40)) if store.get(rid)] == [f"g{i}" for i in range(34, 40)]


def test_the_budget_counts_what_the_store_really_holds():
    """A response's conversation of many small messages took ~15 times its JSON size as Python objects: 20 of them
    grew a service by 309 MB against a 64 MiB budget. Held as its JSON text, what is held is what is counted."""
    def conversation() -> list[dict]:  # each request's own objects, as a service makes them
        return [{"role": "user", "content": str(index)} for index in range(20_000)]

    store = ResponseStore(100, ttl=60, max_bytes=256 * 2**20)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(10):
            assert store.put("a", response(f"r{index}"), conversation())
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert store.bytes * 0.9 <= held <= store.bytes * 1.2 + 64 * 1024, (held, store.bytes)
    assert store.get("r3").conversation == conversation()


def test_a_store_of_size_zero_keeps_nothing():
    store = ResponseStore(0, ttl=60)
    assert not store.put("a", response("r"), []) and store.get("r") is None


def test_a_continued_conversation_is_the_stored_one_and_an_unknown_id_a_404_naming_what_bounds_the_store():
    store = ResponseStore(10, ttl=60)
    store.put("a", response("r1"), [{"role": "user", "content": "hi"}])
    assert store.history(None) == []
    assert store.history("r1") == [{"role": "user", "content": "hi"}]
    with pytest.raises(APIError) as raised:
        store.history("r0")
    assert raised.value.kind is ErrorKind.NOT_FOUND and raised.value.param == "previous_response_id"
    assert "'r0'" in raised.value.message and "RESPONSES_STORE_TTL" in raised.value.message


def test_get_and_delete_answer_the_stored_response_and_404_once_it_is_gone():
    store = ResponseStore(10, ttl=60)
    store.put("a", response("r1", "text"), [])
    assert store.response("r1") == response("r1", "text")
    assert store.deleted("r1") == {"id": "r1", "object": "response", "deleted": True}
    for answer in (store.response, store.deleted):
        with pytest.raises(APIError) as raised:
            answer("r1")
        assert raised.value.kind is ErrorKind.NOT_FOUND and raised.value.param == "response_id"
