"""Turning uploads into chunks: LangChain document loaders per file type, then langchain-text-splitters.

Loaders read from the spooled upload on disk and yield page by page (`lazy_load`), so a large PDF is never held
in memory at once. File names are only ever metadata: nothing is written under a user-supplied path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path, PurePath

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from ovgenai_common.errors import APIError, ErrorKind

SUPPORTED = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
             ".pdf": "pdf"}


def safe_name(filename: str | None) -> str:
    """The base name of an upload, for display and as the document's id; never used as a path."""
    name = PurePath((filename or "").replace("\\", "/")).name.strip()
    if not name or name in (".", ".."):
        raise APIError(ErrorKind.INVALID_REQUEST, "Every uploaded file needs a file name.", "files")
    return name[:255]


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


def load_pages(path: Path, kind: str) -> Iterator[Document]:
    from langchain_community.document_loaders import BSHTMLLoader, PyPDFLoader, TextLoader

    if kind == "pdf":
        loader = PyPDFLoader(str(path))
    elif kind == "html":
        loader = BSHTMLLoader(str(path), open_encoding="utf-8", bs_kwargs={"features": "html.parser"})
    else:
        loader = TextLoader(str(path), encoding="utf-8")
    try:
        yield from loader.lazy_load()
    except Exception as error:  # a parser's failure is the upload's fault: say so
        raise APIError(
            ErrorKind.INVALID_REQUEST, f"Could not read the file as {kind}: {type(error).__name__}: {error}", "files"
        ) from error


def splitter(chunk_size: int, chunk_overlap: int, kind: str) -> RecursiveCharacterTextSplitter:
    if kind == "markdown":
        from langchain_text_splitters import MarkdownTextSplitter

        return MarkdownTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
