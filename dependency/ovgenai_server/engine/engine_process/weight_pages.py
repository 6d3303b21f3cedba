"""Dropping a model file's pages from the engine's memory once the compiled model holds its own copy of them.

OpenVINO maps openvino_model.bin and, when the CPU plugin compiles the model, repacks the weights into its kernels'
layouts in memory of its own. The mapping stays, with every page the repacking read still resident, although
inference never reads it again (only the embedding rows a request's tokens use come back), so a model's weights
counted twice in the engine's memory, where llama.cpp computes from its mapped GGUF as it is and counts them once
(bench/results.md).

`madvise(MADV_DONTNEED)` on a file mapping that cannot be written only unmaps its pages: the file's data stays in
the page cache for the kernel to keep or reclaim, and a page read again faults back in from the file, so nothing can
be lost and the worst case is reading some of it again.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MADV_DONTNEED = 4  # Linux


@dataclass(frozen=True)
class FileMapping:
    start: int
    end: int
    perms: str  # as /proc/<pid>/maps gives them: "r--s", "r-xp", "rw-p", ...
    path: Path


def file_mappings(maps: str) -> list[FileMapping]:
    """The file-backed mappings of a /proc/<pid>/maps text."""
    found = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue  # anonymous, [heap], [stack], ...
        path = fields[5]
        if path.endswith(" (deleted)"):
            continue  # the file is gone: its pages could not be read back
        start, end = (int(value, 16) for value in fields[0].split("-"))
        found.append(FileMapping(start, end, fields[1], Path(path)))
    return found


def releasable(mappings: list[FileMapping], model_path: Path) -> list[FileMapping]:
    """The data mappings of the model's files (a GGUF file itself; an IR folder's files, not its subfolders') that
    cannot be written: dropping their pages is lossless. A writable private mapping may hold changed pages, which
    MADV_DONTNEED would discard: never those; nor code (a library that happens to live beside a GGUF file)."""
    model_path = model_path.resolve()
    ours = (lambda path: path == model_path) if not model_path.is_dir() else (lambda path: path.parent == model_path)
    return [m for m in mappings if "w" not in m.perms and "x" not in m.perms and ours(m.path)]


def release_model_pages(model_path: Path) -> int:
    """Drop this process's resident pages of the model's files (a folder of IR, or a GGUF file); the bytes of
    mappings released. 0 where the platform has no /proc maps or madvise."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        maps = Path("/proc/self/maps").read_text()
        libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter runs on
        madvise = libc.madvise
    except (OSError, AttributeError):  # memory is only saved here: serving goes on without it
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released = 0
    for mapping in releasable(file_mappings(maps), model_path):
        size = mapping.end - mapping.start
        if madvise(mapping.start, size, MADV_DONTNEED) == 0:
            released += size
        else:
            logger.debug("madvise(%s) failed: errno %d", mapping.path, ctypes.get_errno())
    return released
