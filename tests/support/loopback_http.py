"""Plain HTTP stand-ins on loopback: a server on a free port that serves from a daemon thread until stopped, and a
quiet handler base that answers JSON, so that each stand-in says only what it answers."""

from __future__ import annotations

import http.server
import json
import threading


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """Writes no access lines (tests read what their stand-ins record); `reply` answers JSON with its length."""

    def reply(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


class LoopbackHTTP:
    """`handler` served on 127.0.0.1 at `port` (0: a free one), each request on a daemon thread; `stop()` or the end
    of a with-block shuts it down and frees the port (http.server's servers reuse an address left in TIME_WAIT)."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], port: int = 0) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> LoopbackHTTP:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
