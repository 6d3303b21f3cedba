"""The gateway's indices, OPEA's `index_name`: a Chroma collection each, with a DocumentStore per index (store.py).
The default index (COLLECTION_NAME) always exists; another is made by its first ingest and dropped when all of its
documents are deleted. At most MAX_INDICES exist, so that no client can fill the store with collections.

Each request opens its index by name (one call to Chroma), so that an index dropped by another replica is met as
missing (404) rather than through a stale handle. Within the process an index being dropped takes no ingest, and one
being ingested into is not dropped (409); replicas sharing a Chroma server have no such lock, and an ingest there
fails while another replica drops its index.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ovgenai_common.errors import APIError, ErrorKind

from .store import DocumentStore

PARAM = "index_name"
# Chroma's rule for a collection's name (a stricter one than its own today, which older servers apply): 3-63
# characters of [a-zA-Z0-9._-], starting and ending with a letter or digit.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]")
ALL = "all"  # OPEA's name for every index, where a route takes it


def checked(name: str) -> str:
    """`name` if an index may be called so, else a 400 saying the rule."""
    if not NAME.fullmatch(name):
        raise APIError(ErrorKind.INVALID_REQUEST,
                       f"'{name[:100]}' is not an index name: 3 to 63 letters, digits, '.', '_' or '-', starting and "
                       "ending with a letter or digit.", PARAM)
    if name == ALL:
        raise APIError(ErrorKind.INVALID_REQUEST, "'all' means every index, where a route takes it; it names none.",
                       PARAM)
    return name


class Indices:
    """Every index's DocumentStore, each made by `open_store(name)` (which creates its collection) the first time
    it is used, kept while its collection is the same one."""

    def __init__(self, default: str, limit: int, open_store: Callable[[str], DocumentStore]):
        self.limit = limit
        self.open_store = open_store
        self.default = open_store(default)
        self.client = self.default.chunks.client
        self._stores: dict[str, DocumentStore] = {default: self.default}
        self._creating = asyncio.Lock()
        self._writers: Counter[str] = Counter()  # ingests under way, by index
        self._dropping: set[str] = set()

    @property
    def default_name(self) -> str:
        return self.default.location.collection

    def name_of(self, name: str | None) -> str:
        """The index `name` means (None: the default one), a 400 where no index may be called so."""
        return self.default_name if name is None or name == self.default_name else checked(name)

    def names(self) -> list[str]:
        """Every index's name, sorted (the default's among them)."""
        return sorted({collection.name for collection in self.client.list_collections()} | {self.default_name})

    def _current(self, name: str) -> DocumentStore | None:
        """The store of the collection named `name` now, or None where there is none."""
        from chromadb.errors import NotFoundError

        if name == self.default_name:
            return self.default
        try:
            collection = self.client.get_collection(name, embedding_function=None)
        except NotFoundError:
            self._stores.pop(name, None)
            return None
        store = self._stores.get(name)
        if store is None or store.chunks.collection.id != collection.id:  # new, or dropped and made again
            store = self._stores[name] = self.open_store(name)
        return store

    async def get(self, name: str | None) -> DocumentStore:
        """The store of index `name` (None: the default), or a 404 naming it."""
        if (name := self.name_of(name)) == self.default_name:
            return self.default
        store = await asyncio.to_thread(self._current, name)
        if store is None:
            raise APIError(ErrorKind.NOT_FOUND, f"No index named '{name}'; GET /v1/dataprep/indices lists them.",
                           PARAM)
        return store

    async def find(self, name: str | None) -> DocumentStore | None:
        """As `get`, but None for an index that does not exist."""
        try:
            return await self.get(name)
        except APIError as error:
            if error.kind is ErrorKind.NOT_FOUND:
                return None
            raise

    def _create(self, name: str) -> DocumentStore:
        if (store := self._current(name)) is not None:
            return store
        if len(self.names()) >= self.limit:
            raise APIError(ErrorKind.CONFLICT,
                           f"The store holds {self.limit} indices, the most it keeps (MAX_INDICES): ingest into one "
                           f"of them, or delete one (file_path 'all' with its index_name), before making '{name}'.",
                           PARAM)
        store = self._stores[name] = self.open_store(name)
        return store

    @asynccontextmanager
    async def writing(self, name: str | None) -> AsyncIterator[DocumentStore]:
        """The store of index `name` (None: the default), made if it does not exist, for an ingest: the index is not
        dropped until the ingest ends."""
        name = self.name_of(name)
        if name in self._dropping:
            raise APIError(ErrorKind.CONFLICT, f"The index '{name}' is being deleted; send this ingest again when it "
                                               "is.", PARAM)
        self._writers[name] += 1
        try:
            async with self._creating:  # one at a time, so that concurrent ingests cannot pass MAX_INDICES
                store = await asyncio.to_thread(self._create, name)
            yield store
        finally:
            self._writers[name] -= 1
            if not self._writers[name]:
                del self._writers[name]

    async def drop(self, store: DocumentStore) -> int:
        """Every document of the index deleted, and the index with them unless it is the default one; the chunks
        deleted. Refused (409) while this process ingests into it."""
        name = store.location.collection
        if self._writers[name] or name in self._dropping:
            raise APIError(ErrorKind.CONFLICT, f"Documents are being ingested into the index '{name}'; delete it when "
                                               "they are.", PARAM)
        self._dropping.add(name)
        try:
            deleted = await store.delete(None)
            if name != self.default_name:
                await asyncio.to_thread(self._delete_collection, name)
            return deleted
        finally:
            self._dropping.discard(name)

    def _delete_collection(self, name: str) -> None:
        from chromadb.errors import NotFoundError

        self._stores.pop(name, None)
        try:
            self.client.delete_collection(name)
        except NotFoundError:  # another replica dropped it first
            pass

    def recover(self, abandon_before: float | None) -> None:
        """The start-up pass (store.py's `recover`) over every index."""
        for name in self.names():
            store = self._current(name)
            if store is not None:
                store.recover(abandon_before)
