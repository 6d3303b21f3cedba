"""The gateway's upstream services on httpx.MockTransport, for fast tests of its own logic: the embedding service
(a fixed vector per text), the LLM service (a fixed answer, unary or streamed, every request recorded) and a
reranker. The system tests use the real services; these stand in where feedback should take seconds."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np

from ovgenai_services.gateway.app import create_app
from ovgenai_services.gateway.settings import GatewaySettings

DIMENSIONS = 8
EMBEDDING = "http://embedding.test:6000"
LLM = "http://llm.test:9000"
RERANK = "http://rerank.test:8808"


def vector(text: str) -> list[float]:
    """A fixed unit vector per text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    values = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
    return (values / np.linalg.norm(values)).tolist()


class FakeUpstreams:
    def __init__(self, answer: str = "It was Odile Marchetti.") -> None:
        self.answer = answer
        self.chats: list[dict[str, Any]] = []  # the LLM requests' bodies, in order
        self.embedded: list[str] = []
        self.embedding_requests: list[dict[str, Any]] = []  # the embedding requests' bodies, in order
        self.down: set[str] = set()  # hosts that refuse connections
        self.status: dict[str, int] = {}  # hosts that answer this status instead
        self.scores: dict[str, float] = {}  # rerank score by text (default 0)
        self.paths: list[str] = []  # every request's path, in order

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.paths.append(request.url.path)
        if host in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if host in self.status:
            return httpx.Response(self.status[host], json={"error": {"message": "failing on purpose"}})
        body = json.loads(request.content or b"{}")
        if request.url.path == "/v1/embeddings":
            return self._embeddings(body)
        if request.url.path == "/v1/chat/completions":
            self.chats.append(body)
            return self._chat(body)
        if request.url.path == "/rerank":
            ranked = [{"index": i, "score": self.scores.get(text, 0.0)} for i, text in enumerate(body["texts"])]
            return httpx.Response(200, json=ranked)
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(404, json={"detail": "Not Found"})

    def _embeddings(self, body: dict[str, Any]) -> httpx.Response:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.embedded.extend(texts)
        self.embedding_requests.append(body)
        data = []
        for index, text in enumerate(texts):
            values = vector(text)
            if body.get("encoding_format") == "base64":  # the openai client asks for base64 by default
                values = base64.b64encode(np.array(values, dtype=np.float32).tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": values})
        return httpx.Response(200, json={"object": "list", "data": data, "model": body.get("model", ""),
                                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    def _chat(self, body: dict[str, Any]) -> httpx.Response:
        common = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body.get("model", "")}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            return httpx.Response(200, json={
                **common, "object": "chat.completion", "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer},
                             "finish_reason": "stop"}]})
        chunks = [{"role": "assistant", "content": ""}, *({"content": word} for word in self.answer.split(" "))]
        events = [{**common, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in chunks]
        events.append({**common, "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**common, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        return httpx.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})


@asynccontextmanager
async def gateway(tmp_path, upstreams: FakeUpstreams | None = None, **settings) -> AsyncIterator[httpx.AsyncClient]:
    """The real gateway app (its store an embedded Chroma under tmp_path) over ASGI, its upstreams these fakes."""
    upstreams = upstreams or FakeUpstreams()
    config = GatewaySettings(data_dir=str(tmp_path), embedding_endpoint=EMBEDDING, llm_endpoint=LLM, **settings)
    app = create_app(config, transport=upstreams.transport())
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            yield http
