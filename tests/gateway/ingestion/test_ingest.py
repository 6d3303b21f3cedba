"""Ingestion's logic with its indices, store and link fetcher faked: every document read (and refused) before
anything is stored or an index made, chunks named after their document and keeping where they are in it, a version
per content and chunking, the spool folder removed however a request ends, and the start-up sweep of spool folders a
crash left."""

from __future__ import annotations

import io
import os
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from starlette.datastructures import UploadFile

from ovgenai_common.body import Pace
from ovgenai_common.errors import APIError
from ovgenai_services.gateway.ingestion.ingest import (
    Chunking,
    Ingestion,
    IngestLimits,
    TextField,
    recover,
    spool_root,
    sweep_spool,
    text_fields,
)
from ovgenai_services.gateway.ingestion.links import Fetched
from ovgenai_services.gateway.ingestion.pool import IngestPool
from ovgenai_services.gateway.store import IngestResult

CHUNKING = Chunking(size=50, overlap=0)


class FakeStore:
    def __init__(self) -> None:
        self.stored: dict[str, tuple[str, list]] = {}
        self.recovered: list[float | None] = []

    async def ingest(self, name, version, chunks) -> IngestResult:
        self.stored[name] = (version, [chunk async for chunk in chunks])
        return IngestResult(name, len(self.stored[name][1]), "ingested")

    def recover(self, older_than):
        self.recovered.append(older_than)


class FakeIndices:
    """One store for every index; which index each ingest wrote to."""

    def __init__(self, store: FakeStore):
        self.store = store
        self.written: list[str | None] = []

    @asynccontextmanager
    async def writing(self, name):
        self.written.append(name)
        yield self.store

    def recover(self, older_than):
        self.store.recover(older_than)


class FakeLinks:
    def __init__(self, pages: dict[str, tuple[str, bytes]]):
        self.pages = pages

    async def fetch(self, link: str, folder: Path) -> Fetched:
        kind, body = self.pages[link]
        path = folder / f"link-{len(list(folder.iterdir()))}"
        path.write_bytes(body)
        return Fetched(path, kind)


def upload(name: str, data: bytes) -> UploadFile:
    return UploadFile(io.BytesIO(data), filename=name)


@pytest.fixture
def made(tmp_path):
    store = FakeStore()
    pages = {"https://example.com/a": ("html", b"<p>A page about locks.</p>")}
    ingestion = Ingestion(FakeIndices(store), FakeLinks(pages), IngestPool(1, 0, 1, Pace(1000, 30)),
                          IngestLimits(spool_root(tmp_path), max_upload_bytes=1000, max_html_bytes=100,
                                       max_parsed_bytes=100))
    return ingestion, store, spool_root(tmp_path)


async def test_files_links_and_texts_are_stored_in_order_as_chunks_of_their_document(made):
    ingestion, store, _ = made
    results = await ingestion.ingest([upload("dir/a.txt", b"Alpha. " * 20)], ["https://example.com/a"],
                                     [TextField("t.md", "# Title\n\nBody text.")], CHUNKING)
    assert [r.name for r in results] == ["a.txt", "https://example.com/a", "t.md"]
    assert all(chunk.metadata["source"] == name for name, (_, chunks) in store.stored.items() for chunk in chunks)
    assert [c.page_content for c in store.stored["https://example.com/a"][1]] == ["A page about locks."]
    assert len(store.stored["a.txt"][1]) > 1  # 140 characters in chunks of 50


async def test_the_version_changes_with_the_chunking(made):
    ingestion, store, _ = made
    await ingestion.ingest([], [], [TextField("t.txt", "Some text.")], CHUNKING)
    first = store.stored["t.txt"][0]
    await ingestion.ingest([], [], [TextField("t.txt", "Some text.")], CHUNKING)
    assert store.stored["t.txt"][0] == first
    await ingestion.ingest([], [], [TextField("t.txt", "Some text.")], Chunking(60, 0))
    assert store.stored["t.txt"][0] != first


@pytest.mark.parametrize(("uploads", "texts", "status", "param"), [
    ([("big.txt", b"x" * 1001)], [], 413, "files"),  # MAX_UPLOAD_BYTES
    ([("empty.txt", b"")], [], 400, "files"),
    ([("page.html", b"<p>" + b"x" * 200 + b"</p>")], [], 413, "files"),  # MAX_HTML_BYTES
    ([("slides.pptx", b"x")], [], 400, "files"),  # no zip archive
    ([("ok.txt", b"fine"), ("data.json", b'{"a": ')], [], 400, "files"),  # read to its end before anything is stored
    ([("ok.txt", b"fine"), ("latin.csv", "city\ncaf\xe9\n".encode("latin-1"))], [], 400, "files"),
    ([("big.json", b"[" + b"1," * 60 + b"1]")], [], 413, "files"),  # MAX_PARSED_BYTES
    ([("ok.txt", b"fine")], [TextField("blank.txt", "  ")], 400, "text"),
    ([("a/n.txt", b"one"), ("b/n.txt", b"two")], [], 400, "files"),  # one stored name for two documents
    ([("n.txt", b"one")], [TextField("n.txt", "two")], 400, "files"),
])
async def test_a_refused_document_fails_the_request_with_nothing_stored(made, uploads, texts, status, param):
    ingestion, store, root = made
    with pytest.raises(APIError) as refused:
        await ingestion.ingest([upload(name, data) for name, data in uploads], [], texts, CHUNKING)
    assert (refused.value.status, refused.value.param) == (status, param)
    assert store.stored == {} and ingestion.indices.written == []  # nothing stored, no index made
    assert not root.exists() or list(root.iterdir()) == []  # the request's spool folder is gone


async def test_an_html_link_past_the_limit_names_the_link_list(made):
    ingestion, store, _ = made
    ingestion.links.pages["https://example.com/big"] = ("html", b"x" * 101)
    with pytest.raises(APIError) as refused:
        await ingestion.ingest([], ["https://example.com/big"], [], CHUNKING)
    assert (refused.value.status, refused.value.param) == (413, "link_list") and store.stored == {}


async def test_a_file_that_cannot_be_read_is_named_and_an_index_made_only_once_all_are_read(made):
    ingestion, store, _ = made
    with pytest.raises(APIError) as refused:
        await ingestion.ingest([upload("a.txt", b"Alpha."), upload("report.docx", b"no zip")], [], [], CHUNKING,
                               "team")
    assert "'report.docx'" in refused.value.message and store.stored == {} and ingestion.indices.written == []
    rows = b"city,river\nLyon,Rhone\nParis,Seine\nArles,Rhone\n"
    await ingestion.ingest([upload("rows.csv", rows)], [], [], CHUNKING, "team")
    assert ingestion.indices.written == ["team"]
    [(_, chunks)] = store.stored.values()
    assert [(c.page_content, c.metadata) for c in chunks] == [  # records grouped within a chunk's 50 characters
        ("city: Lyon; river: Rhone\ncity: Paris; river: Seine", {"rows": "2-3", "source": "rows.csv"}),
        ("city: Arles; river: Rhone", {"rows": "4", "source": "rows.csv"})]


def test_texts_without_a_name_are_named_after_their_content():
    [named, unnamed] = text_fields(["one", "two"], ["dir/first.txt"])
    assert named == TextField("first.txt", "one")
    assert unnamed.name.startswith("text-") and unnamed.name.endswith(".txt") and unnamed.body == "two"
    assert text_fields(["two"], [""]) == [unnamed]


def test_the_sweep_removes_spool_folders_older_than_the_cut(tmp_path):
    root = spool_root(tmp_path)
    (root / "old").mkdir(parents=True)
    (root / "young").mkdir()
    os.utime(root / "old", (time.time() - 7200, time.time() - 7200))
    assert sweep_spool(root, time.time() - 3600) == 1 and [p.name for p in root.iterdir()] == ["young"]
    assert sweep_spool(root, None) == 1 and list(root.iterdir()) == []
    assert sweep_spool(tmp_path / "missing", None) == 0


def test_recovery_repairs_the_store_and_sweeps_with_one_cut(tmp_path):
    store, root = FakeStore(), spool_root(tmp_path)
    (root / "left").mkdir(parents=True)
    recover(FakeIndices(store), root, None)
    assert store.recovered == [None] and list(root.iterdir()) == []
    recover(FakeIndices(store), root, 3600)
    assert abs(store.recovered[1] - (time.time() - 3600)) < 60
