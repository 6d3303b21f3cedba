"""Commit markers on a real embedded Chroma: the states a crash leaves (a document's chunks partly stored, a commit
half done, two committed versions, chunks from before commit markers) are written directly, since a real kill
(system/test_ingest_guarantees.py) cannot choose the moment it lands; the start-up pass is what repairs them."""

from __future__ import annotations

import time

import pytest

from ovgenai_services.gateway import versions
from ovgenai_services.gateway.chroma import Chunks, StoreLocation
from ovgenai_services.gateway.versions import LEGACY, Version


@pytest.fixture
def chunks(tmp_path):
    return Chunks(StoreLocation("chatqna", data_dir=tmp_path))


def write(chunks: Chunks, name: str, ingest: str, started: int, marks: list[tuple[bool, int | None]],
          content_hash: str = "h") -> None:
    """Chunks as an ingest leaves them: (committed, total) each."""
    chunks.upsert([f"{ingest}-{i}" for i in range(len(marks))], [[float(i + 1)] * 8 for i in range(len(marks))],
                  [f"{name} chunk {i} of {ingest}" for i in range(len(marks))],
                  [{"source": name, "content_hash": content_hash, "chunk": i, "page": 0, "ingest": ingest,
                    "started": started, "committed": committed, **({"total": total} if total else {})}
                   for i, (committed, total) in enumerate(marks)])


def listed(chunks: Chunks) -> dict[str, int]:
    return versions.newest_counts(chunks)


def test_uncommitted_chunks_are_invisible_and_a_restart_removes_them(chunks):
    write(chunks, "partial.txt", "a", 1, [(False, None)] * 3)
    assert listed(chunks) == {} and versions.committed(chunks, "partial.txt") == {}
    assert versions.recover(chunks, None).removed == 3 and chunks.count() == 0


def test_a_half_done_commit_is_finished(chunks):
    write(chunks, "doc.txt", "a", 1, [(True, 4), (True, 4), (False, None), (False, None)])
    assert versions.recover(chunks, None).finished == 2
    assert listed(chunks) == {"doc.txt": 4} and set(versions.committed(chunks, "doc.txt")) == {"a"}


def test_a_commit_with_chunks_missing_is_removed(chunks):
    write(chunks, "doc.txt", "a", 1, [(True, 5), (False, None), (False, None)])  # two chunks never stored
    assert versions.recover(chunks, None).removed == 3 and listed(chunks) == {}


def test_of_two_committed_versions_the_newest_is_kept(chunks):
    write(chunks, "doc.txt", "old", 1, [(True, 3)] * 3)
    write(chunks, "doc.txt", "new", 2, [(True, 2)] * 2)
    assert listed(chunks) == {"doc.txt": 2}  # the listing counts the newest already
    assert versions.recover(chunks, None).superseded == 3
    assert set(versions.committed(chunks, "doc.txt")) == {"new"}


def test_chunks_from_before_the_markers_are_marked_committed(chunks):
    chunks.upsert(["x-0", "x-1"], [[1.0] * 8, [2.0] * 8], ["a", "b"],
                  [{"source": "old.txt", "content_hash": "h", "chunk": i, "page": 0} for i in range(2)])
    assert versions.recover(chunks, None).migrated == 2
    assert listed(chunks) == {"old.txt": 2}
    assert versions.committed(chunks, "old.txt") == {LEGACY: Version(0, "h", committed=2, total=2)}


def test_a_shared_server_keeps_young_uncommitted_chunks_of_other_replicas(chunks):
    now = time.time()
    write(chunks, "theirs.txt", "young", int(now * 1e6), [(False, None)] * 2)
    write(chunks, "stale.txt", "old", int((now - 7200) * 1e6), [(False, None)] * 2)
    assert versions.recover(chunks, now - 3600).removed == 2
    assert {m["ingest"] for _, m in chunks.pages()} == {"young"}


def test_nothing_to_repair_is_reported_as_nothing(chunks):
    write(chunks, "doc.txt", "a", 1, [(True, 2)] * 2)
    assert versions.recover(chunks, None) == versions.Recovery()


def test_commit_marks_the_pending_chunks_with_the_total(chunks):
    write(chunks, "doc.txt", "a", 1, [(False, None)] * 3)
    assert versions.commit(chunks, "doc.txt", "a", 3) == 3
    assert all(m["committed"] and m["total"] == 3 for _, m in chunks.pages())
    assert versions.commit(chunks, "doc.txt", "a", 3) == 0  # nothing pending any more


def test_an_ingest_supersedes_older_versions_and_itself_when_a_newer_one_committed(chunks):
    write(chunks, "doc.txt", "old", 1, [(True, 1)])
    write(chunks, "doc.txt", "mine", 2, [(True, 1)])
    assert versions.superseded(chunks, "doc.txt", "mine") == ["old"]
    write(chunks, "doc.txt", "later", 3, [(True, 1)])  # another replica's, committed meanwhile
    assert versions.superseded(chunks, "doc.txt", "mine") == ["old", "mine"]
    assert versions.superseded(chunks, "doc.txt", "gone") == []


def test_the_newest_version_is_the_one_started_last_then_the_larger_id():
    assert versions.newest({"a": Version(2), "b": Version(1)}) == "a"
    assert versions.newest({"a": Version(1), "b": Version(1)}) == "b"


@pytest.mark.parametrize(("marks", "complete"), [
    ([{"committed": True, "total": 2}, {"committed": False}], True),
    ([{"committed": True, "total": 3}, {"committed": False}], False),
    ([{"committed": False}, {"committed": False}], False),  # no commit began: the total is unknown
])
def test_a_version_is_complete_when_its_chunks_reach_the_total(marks, complete):
    version = Version(1)
    for metadata in marks:
        version.count(metadata)
    assert version.complete() is complete
