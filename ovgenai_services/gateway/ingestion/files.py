"""An upload's name, kind and content hash. File names are only ever metadata: nothing is written under a
user-supplied path."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePath

from ovgenai_common.errors import APIError, ErrorKind

SUPPORTED = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
             ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".csv": "csv", ".json": "json"}
# The kind a Content-Type names: a link's, and an upload's whose name has no extension of SUPPORTED.
CONTENT_TYPES = {
    "text/html": "html", "application/xhtml+xml": "html", "application/pdf": "pdf", "text/plain": "text",
    "text/markdown": "markdown", "text/x-markdown": "markdown", "text/csv": "csv", "application/json": "json",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
# Kinds read as bytes; the others are text, read as UTF-8.
BINARY = frozenset({"pdf", "docx", "pptx", "xlsx"})
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


def content_kind(content_type: str | None) -> str | None:
    """The kind a Content-Type header names (its parameters, such as a charset, aside)."""
    return CONTENT_TYPES.get((content_type or "").split(";")[0].strip().lower())


def kind_of(name: str, content_type: str | None = None) -> str:
    """How a file is read: by its name's extension, else by the content type it was sent with."""
    kind = SUPPORTED.get(PurePath(name).suffix.lower()) or content_kind(content_type)
    if kind is None:
        raise APIError(
            ErrorKind.INVALID_REQUEST,
            f"Unsupported file type for '{name}'; supported: {', '.join(sorted(SUPPORTED))} (or a content type "
            f"that names one of them).",
            "files",
        )
    return kind


def suffix_of(kind: str) -> str:
    """The extension a spooled file of `kind` is given."""
    return next(suffix for suffix, each in SUPPORTED.items() if each == kind)


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
