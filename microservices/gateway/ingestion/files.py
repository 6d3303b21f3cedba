"""An upload's name, kind and content hash. File names are only ever metadata: nothing is written under a
user-supplied path."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePath

from ovgenai_common.errors import APIError, ErrorKind

SUPPORTED = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
             ".pdf": "pdf"}
MAX_NAME = 255


def safe_name(filename: str | None) -> str:
    """The base name of an upload, for display and as the document's id; never used as a path. A name longer than
    MAX_NAME keeps its extension, which says how the file is read."""
    name = PurePath((filename or "").replace("\\", "/")).name.strip()
    if not name or name in (".", ".."):
        raise APIError(ErrorKind.INVALID_REQUEST, "Every uploaded file needs a file name.", "files")
    if len(name) <= MAX_NAME:
        return name
    suffix = PurePath(name).suffix
    return name[:MAX_NAME - len(suffix)] + suffix if len(suffix) < MAX_NAME else name[:MAX_NAME]


def kind_of(name: str) -> str:
    kind = SUPPORTED.get(PurePath(name).suffix.lower())
    if kind is None:
        raise APIError(
            ErrorKind.INVALID_REQUEST,
            f"Unsupported file type for '{name}'; supported: {', '.join(sorted(SUPPORTED))}.",
            "files",
        )
    return kind


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
