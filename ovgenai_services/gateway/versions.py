"""A document's versions, kept whole or absent by commit markers on its chunks, and the start-up pass that repairs
what a crash left.

Chroma has no transactions, so each ingest writes its chunks marked `committed: false` under an ingest id of its
own, and only once every chunk is stored marks them committed (with the document's chunk count, `total`); listing,
retrieval and the "unchanged" check see committed chunks only. Then the document's other versions are deleted, the
newest ingest winning, so a failed re-ingest leaves the previous version intact and concurrent ingests of one name
end with one version. A crash can leave uncommitted chunks, a half-done commit or two committed versions:
`recover()` runs before the gateway serves and removes the first (a document's chunks that were never all stored),
finishes the second (its chunks were all stored before the commit began, which `total` lets it check) and keeps
the newest of the third. Chunks written before these markers existed are marked committed by the same pass.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .chroma import Chunks

logger = logging.getLogger(__name__)
COMMITTED = {"committed": True}
# The ingest id given to chunks stored before commit markers existed.
LEGACY = "legacy"


@dataclass
class Version:
    """One ingest's chunks of a document, as the store holds them."""

    started: int  # microseconds since the epoch
    content_hash: str = ""
    committed: int = 0
    pending: int = 0
    total: int | None = None  # set when the commit began: every chunk was stored by then

    def count(self, metadata: dict[str, Any]) -> None:
        """One more chunk of this version."""
        if metadata.get("committed"):
            self.committed += 1
            self.total = metadata.get("total", self.total)
        else:
            self.pending += 1

    def complete(self) -> bool:
        return self.total is not None and self.committed + self.pending == self.total


@dataclass
class Recovery:
    removed: int = 0  # uncommitted chunks of documents never completely stored
    finished: int = 0  # chunks of interrupted commits, marked committed
    superseded: int = 0  # chunks of older versions
    migrated: int = 0  # chunks from before the markers


def of(name: str, ingest: str) -> dict[str, Any]:
    """The chunks of one version."""
    return {"$and": [{"source": name}, {"ingest": ingest}]}


def committed_of(name: str) -> dict[str, Any]:
    """The committed chunks of a document."""
    return {"$and": [{"source": name}, COMMITTED]}


def newest(versions: dict[str, Version]) -> str:
    """The version started last (ties, across replicas' clocks, go to the larger ingest id)."""
    return max(versions, key=lambda ingest: (versions[ingest].started, ingest))


def versions(chunks: Chunks, where: dict[str, Any]) -> dict[str, Version]:
    """The versions of the chunks that `where` selects, by ingest id."""
    found: dict[str, Version] = {}
    for _, metadata in chunks.pages(where):
        found.setdefault(metadata.get("ingest", LEGACY), Version(metadata.get("started", 0),
                                                                  metadata.get("content_hash", ""))).count(metadata)
    return found


def committed(chunks: Chunks, name: str) -> dict[str, Version]:
    return versions(chunks, committed_of(name))


def commit(chunks: Chunks, name: str, ingest: str, total: int) -> int:
    """Mark an ingest's uncommitted chunks committed, `total` being how many it has in all; how many were."""
    pending = {"$and": [{"source": name}, {"ingest": ingest}, {"committed": False}]}
    ids = chunks.ids(pending)  # read whole first: marking chunks committed takes them out of the selection
    chunks.update(ids, lambda metadata: {**metadata, "committed": True, "total": total})
    return len(ids)


def superseded(chunks: Chunks, name: str, ingest: str) -> list[str]:
    """The committed versions of `name` that this ingest replaces: those older than it; and itself, if a newer one
    was committed meanwhile (by another replica)."""
    found = committed(chunks, name)
    if ingest not in found:
        return []
    mine = (found[ingest].started, ingest)
    older = [other for other, version in found.items() if other != ingest and (version.started, other) < mine]
    newer = any((version.started, other) > mine for other, version in found.items() if other != ingest)
    return [*older, *([ingest] if newer else [])]


def keep_newest(chunks: Chunks, name: str) -> int:
    """Delete every committed version of `name` but the newest; the chunks deleted."""
    found = committed(chunks, name)
    if len(found) < 2:
        return 0
    kept = newest(found)
    return sum(chunks.delete(of(name, ingest)) for ingest in found if ingest != kept)


def newest_counts(chunks: Chunks) -> dict[str, int]:
    """Each document's chunk count: its newest committed version's."""
    per_version = Counter((m["source"], m.get("started", 0), m.get("ingest", "")) for _, m in chunks.pages(COMMITTED))
    counts: dict[str, tuple[tuple[float, str], int]] = {}
    for (name, started, ingest), count in per_version.items():
        if name not in counts or (started, ingest) > counts[name][0]:
            counts[name] = ((started, ingest), count)
    return {name: count for name, (_, count) in counts.items()}


def recover(chunks: Chunks, abandon_before: float | None) -> Recovery:
    """Make every document whole or absent after a crash (see the module's docstring). Uncommitted chunks of ingests
    started before `abandon_before` (seconds since the epoch) are removed; None: all are (nobody else writes to this
    store)."""
    report = Recovery()
    found: dict[tuple[str, str], Version] = {}
    legacy: dict[str, list[str]] = {}
    for chunk_id, metadata in chunks.pages():
        if "ingest" not in metadata:
            legacy.setdefault(metadata.get("source", ""), []).append(chunk_id)
        else:
            found.setdefault((metadata["source"], metadata["ingest"]),
                             Version(metadata.get("started", 0))).count(metadata)
    for name, ids in legacy.items():  # stored before these markers, when every ingest ended complete or failed
        marks = {"ingest": LEGACY, "started": 0, "committed": True, "total": len(ids)}
        chunks.update(ids, lambda metadata, marks=marks: {**metadata, **marks})
        found[(name, LEGACY)] = Version(0, committed=len(ids), total=len(ids))
        report.migrated += len(ids)
    for (name, ingest), version in found.items():
        if version.pending and version.committed and version.complete():
            report.finished += commit(chunks, name, ingest, version.total or 0)  # every chunk was stored
            version.committed, version.pending = version.committed + version.pending, 0
        elif not (version.complete() and not version.pending) and (
                abandon_before is None or version.started < abandon_before * 1_000_000):
            report.removed += chunks.delete(of(name, ingest))
            version.committed = version.pending = 0
    names = Counter(name for (name, _), version in found.items() if version.committed)
    for name in (name for name, count in names.items() if count > 1):
        report.superseded += keep_newest(chunks, name)
    if any(vars(report).values()):
        logger.warning("recovered the vector store after an interrupted ingest: %s", report)
    return report
