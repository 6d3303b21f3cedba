"""A stand-in for the gateway's embedding and rerank service on loopback, for system tests that need the gateway
to ingest or to check its upstreams without a model: `/health`, OpenAI's `/v1/embeddings` (a fixed vector per text)
and TEI's `/rerank`, every request counted by path."""

from __future__ import annotations

import http.server
import json
import threading
from collections import Counter

from tests.gateway.fake_upstreams import vector


class EmbeddingStandIn:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()  # requests by path
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - the http.server API
                stand_in.requests[self.path] += 1
                self.answer(200 if self.path == "/health" else 404, {"status": "ok"})

            def do_POST(self):  # noqa: N802 - the http.server API
                stand_in.requests[self.path] += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/v1/embeddings":
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": vector(str(text))}
                            for i, text in enumerate(texts)]
                    self.answer(200, {"object": "list", "data": data, "model": "m",
                                      "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                elif self.path == "/rerank":
                    self.answer(200, [{"index": i, "score": 1.0 / (i + 1)} for i in range(len(body["texts"]))])
                else:
                    self.answer(404, {"error": {"message": "no such route", "type": "not_found_error"}})

            def answer(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def inference(self) -> int:
        """Requests that would have run a model: embeddings and reranks."""
        return self.requests["/v1/embeddings"] + self.requests["/rerank"]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
