"""A Hugging Face Hub on loopback, for tests of code that downloads with the real `huggingface_hub` client.

It answers the requests huggingface_hub makes, as the Hub answers them (read from huggingface_hub's own source):

- `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}`: the repository's info, `sha` (the commit)
  and `siblings` (its files);
- `HEAD` and `GET /{repo}/resolve/{rev}/{path}`: the file, with `X-Repo-Commit`, `ETag` (and for large files
  `X-Linked-Etag` and `X-Linked-Size`, as for LFS files), `Content-Length`, and `Range` requests answered with 206;
- errors with the Hub's `X-Error-Code`, which huggingface_hub turns into its error classes: 404 `RepoNotFound`,
  404 `RevisionNotFound`, 404 `EntryNotFound`, and for a gated repository 401 (no token) or 403 (a token without
  access) `GatedRepo` on its files (its info stays public, as on the Hub).

A file can be set to break its first transfer mid-way (`cut_first_transfer`): the server sends the full
`Content-Length`, then closes the connection part-way; huggingface_hub then resumes with a `Range` request. Every
request is recorded (`requests`), so a test can check what was asked and what was not.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.loopback_http import LoopbackHTTP, QuietHandler

LFS_THRESHOLD = 10 * 1024 * 1024  # files at least this large are answered as the Hub answers LFS files


@dataclass
class Revision:
    commit: str
    files: dict[str, Path]  # path in the repository -> file on disk


@dataclass
class Repository:
    revisions: dict[str, Revision] = field(default_factory=dict)  # branch or tag -> revision
    gated: bool = False

    def find(self, revision: str) -> Revision | None:
        if revision in self.revisions:
            return self.revisions[revision]
        return next((r for r in self.revisions.values() if r.commit == revision), None)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None
    status: int


class LoopbackHub:
    def __init__(self, granted_token: str = "hf_granted"):
        self.repositories: dict[str, Repository] = {}
        self.granted_token = granted_token
        self.requests: list[Request] = []
        self._cuts: dict[tuple[str, str], int] = {}  # (repo, path) -> bytes sent before the first transfer breaks
        self._lock = threading.Lock()
        self._http = LoopbackHTTP(self._handler())
        self.url = self._http.url

    # --- set-up -------------------------------------------------------------------------------------------------

    def add(self, repo_id: str, files: Path | dict[str, Path], revision: str = "main", gated: bool = False) -> str:
        """Publish a folder (every file in it) or named files as `revision` of `repo_id`; returns the commit."""
        if isinstance(files, Path):
            files = {str(p.relative_to(files)): p for p in sorted(files.rglob("*")) if p.is_file()}
        digest = hashlib.sha1(repr(sorted((name, _etag(path)) for name, path in files.items())).encode())
        commit = hashlib.sha1(f"{repo_id}@{revision}:{digest.hexdigest()}".encode()).hexdigest()
        repository = self.repositories.setdefault(repo_id, Repository())
        repository.revisions[revision] = Revision(commit, dict(files))
        repository.gated = repository.gated or gated
        return commit

    def cut_first_transfer(self, repo_id: str, path: str, after_bytes: int) -> None:
        self._cuts[(repo_id, path)] = after_bytes

    def env(self, home: Path) -> dict[str, str]:
        """The environment that points huggingface_hub at this hub, with its cache under `home` (HF_HOME)."""
        return {"HF_ENDPOINT": self.url, "HF_HOME": str(home), "HF_HUB_OFFLINE": "0", "HF_TOKEN": "",
                "HUGGINGFACEHUB_API_TOKEN": "", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "10",
                "HF_HUB_DOWNLOAD_TIMEOUT": "10", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}

    def gets(self, path_part: str) -> list[Request]:
        """The GET requests whose path contains `path_part`."""
        return [r for r in self.requests if r.method == "GET" and path_part in r.path]

    def __enter__(self) -> LoopbackHub:
        return self

    def __exit__(self, *exc) -> None:
        self._http.stop()

    # --- the server ---------------------------------------------------------------------------------------------

    def _handler(self):
        hub = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the Hub; huggingface_hub's httpx client reuses connections

            def do_GET(self) -> None:
                hub._answer(self)

            def do_HEAD(self) -> None:
                hub._answer(self)

        return Handler

    _API = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<revision>[^/?]+))?/?$")
    _RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")

    def _record(self, handler, status: int) -> None:
        with self._lock:
            self.requests.append(Request(handler.command, handler.path, handler.headers.get("Range"),
                                         handler.headers.get("Authorization"), status))

    def _error(self, handler, status: int, code: str, message: str) -> None:
        self._record(handler, status)
        body = json.dumps({"error": message}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("X-Error-Code", code)
        handler.send_header("X-Error-Message", message)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    def _answer(self, handler) -> None:
        from urllib.parse import unquote, urlsplit

        path = unquote(urlsplit(handler.path).path)
        api, resolve = self._API.match(path), self._RESOLVE.match(path)
        match = api or resolve
        if match is None:
            return self._error(handler, 404, "EntryNotFound", f"Nothing at {path}")
        repo_id = match["repo"]
        repository = self.repositories.get(repo_id)
        if repository is None:
            return self._error(handler, 404, "RepoNotFound", f"Repository not found: {repo_id}")
        revision_name = match["revision"] or "main"
        revision = repository.find(revision_name)
        if revision is None:
            return self._error(handler, 404, "RevisionNotFound", f"Invalid rev id: {revision_name}")
        if api:
            return self._info(handler, repo_id, repository, revision)
        if repository.gated:
            token = (handler.headers.get("Authorization") or "").removeprefix("Bearer ")
            if token != self.granted_token:
                status = 403 if token else 401
                return self._error(handler, status, "GatedRepo",
                                   f"Access to model {repo_id} is restricted. You must have access to it and be "
                                   "authenticated to access it. Please log in.")
        file = revision.files.get(match["path"])
        if file is None:
            return self._error(handler, 404, "EntryNotFound", f"{match['path']} does not exist on {revision_name}")
        self._file(handler, repo_id, match["path"], revision.commit, file)

    def _info(self, handler, repo_id: str, repository: Repository, revision: Revision) -> None:
        body = json.dumps({
            "id": repo_id, "modelId": repo_id, "sha": revision.commit, "private": False,
            "gated": "manual" if repository.gated else False, "disabled": False,
            # Sizes as the Hub gives them with ?blobs=true (files_metadata): a full disk's message says how much.
            "siblings": [{"rfilename": name, "size": revision.files[name].stat().st_size}
                         for name in sorted(revision.files)],
        }).encode()
        self._record(handler, 200)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    def _file(self, handler, repo_id: str, name: str, commit: str, file: Path) -> None:
        size = file.stat().st_size
        start = 0
        wanted = handler.headers.get("Range")
        if wanted:
            start = int(re.fullmatch(r"bytes=(\d+)-", wanted.strip())[1])
        status = 206 if wanted else 200
        cut = None
        if handler.command == "GET" and not wanted:
            with self._lock:
                cut = self._cuts.pop((repo_id, name), None)
        self._record(handler, status)
        handler.send_response(status)
        etag = _etag(file)
        handler.send_header("ETag", f'"{etag}"')
        if size >= LFS_THRESHOLD:  # as for an LFS file: the linked file's etag and size
            handler.send_header("X-Linked-Etag", f'"{etag}"')
            handler.send_header("X-Linked-Size", str(size))
        handler.send_header("X-Repo-Commit", commit)
        handler.send_header("Accept-Ranges", "bytes")
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(size - start))
        if wanted:
            handler.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        handler.end_headers()
        if handler.command == "HEAD":
            return
        with file.open("rb") as source:
            source.seek(start)
            remaining = cut if cut is not None else size - start
            while remaining > 0:
                chunk = source.read(min(1 << 20, remaining))
                if not chunk:
                    break
                handler.wfile.write(chunk)
                remaining -= len(chunk)
        if cut is not None:  # the connection breaks: fewer bytes than Content-Length said
            handler.wfile.flush()
            handler.close_connection = True


_ETAGS: dict[tuple[str, float, int], str] = {}


def _etag(path: Path) -> str:
    """The file's sha256, as the Hub gives LFS files (cached by path, modification time and size)."""
    stat = path.stat()
    key = (str(path), stat.st_mtime, stat.st_size)
    if key not in _ETAGS:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _ETAGS[key] = digest.hexdigest()
    return _ETAGS[key]
