"""The embedding service's own methods around stand-ins for the model: a tokenizer and a batcher that record
calls, and a reranker that scores every document 1."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from microservices.embedding.service import EmbeddingService


class RecordingTokenizer:
    """Counts tokens as the real one does, and remembers which thread asked."""

    def __init__(self):
        self.threads: list[threading.Thread] = []

    def encode(self, texts):
        import numpy as np

        self.threads.append(threading.current_thread())
        mask = np.ones((len(texts), 3), dtype=np.int64)
        return SimpleNamespace(attention_mask=SimpleNamespace(data=mask))

    def decode(self, ids):
        self.threads.append(threading.current_thread())
        return "x" * len(ids)


class Batcher:
    alive = True

    async def submit(self, texts, _counted):
        return [[3.0, 4.0] for _ in texts]

    async def run_alone(self, function, *args):
        return function(*args)


def service(normalize: bool = True, max_inputs: int = 8) -> EmbeddingService:
    """The service's own methods around stand-ins for the model (a tokenizer and a batcher that record calls)."""
    svc = object.__new__(EmbeddingService)
    svc.settings = SimpleNamespace(max_inputs_per_request=max_inputs, truncation="truncate")
    svc.info = SimpleNamespace(name="m", normalize=normalize)
    svc.max_tokens, svc.vocabulary, svc.dimensions = 256, 100, 2
    svc.tokenizer, svc.batcher = RecordingTokenizer(), Batcher()
    svc.metrics = SimpleNamespace(observe_request=lambda *_: None)
    svc.reranker = SimpleNamespace(rerank=lambda _query, documents: [(i, 1.0) for i in range(len(documents))])
    return svc
