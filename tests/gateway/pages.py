"""A local web server for link_list tests: fixed pages on loopback, every request it receives recorded."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tests.support.loopback_http import LoopbackHTTP, QuietHandler


@dataclass
class Page:
    body: bytes = b""
    content_type: str | None = "text/plain"
    status: int = 200
    location: str | None = None  # a redirect's target
    declare_length: bool = True  # False: no Content-Length, the body is sent until the connection closes
    hold: bool = False  # answer only once the server is stopped (a link that never finishes)
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Content-Encoding


@dataclass
class PageServer:
    pages: dict[str, Page]
    requests: list[str] = field(default_factory=list)

    def __post_init__(self):
        server = self
        released = threading.Event()
        self.released = released

        class Handler(QuietHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                server.requests.append(self.path)
                page = server.pages.get(self.path, Page(b"not found", status=404))
                if page.hold:
                    released.wait(60)
                self.send_response(page.status)
                if page.content_type:
                    self.send_header("Content-Type", page.content_type)
                if page.location:
                    self.send_header("Location", page.location)
                for name, value in page.headers.items():
                    self.send_header(name, value)
                if page.declare_length:
                    self.send_header("Content-Length", str(len(page.body)))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(page.body)

        self.http = LoopbackHTTP(Handler)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.http.port}{path}"

    def stop(self) -> None:
        self.released.set()
        self.http.stop()
