"""A stand-in for the gateway's embedding and rerank service on loopback, for system tests that need the gateway
to ingest or to check its upstreams without a model: `/health`, OpenAI's `/v1/embeddings` (a fixed vector per text)
and TEI's `/rerank`, every request counted by path."""

from __future__ import annotations

import json
from collections import Counter

from tests.gateway.fake_upstreams import vector
from tests.support.loopback_http import LoopbackHTTP, QuietHandler


class EmbeddingStandIn(LoopbackHTTP):
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()  # requests by path
        stand_in = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - the http.server API
                stand_in.requests[self.path] += 1
                self.reply(200 if self.path == "/health" else 404, {"status": "ok"})

            def do_POST(self):  # noqa: N802 - the http.server API
                stand_in.requests[self.path] += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/v1/embeddings":
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": vector(str(text))}
                            for i, text in enumerate(texts)]
                    self.reply(200, {"object": "list", "data": data, "model": "m",
                                     "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                elif self.path == "/rerank":
                    self.reply(200, [{"index": i, "score": 1.0 / (i + 1)} for i in range(len(body["texts"]))])
                else:
                    self.reply(404, {"error": {"message": "no such route", "type": "not_found_error"}})

        super().__init__(Handler)

    def inference(self) -> int:
        """Requests that would have run a model: embeddings and reranks."""
        return self.requests["/v1/embeddings"] + self.requests["/rerank"]
