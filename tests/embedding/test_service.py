"""The embedding service's request handling around the pipeline: what runs off the event loop, and the limits."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from microservices.embedding.service import EmbeddingService
from ovgenai_common.errors import APIError


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
    async def submit(self, texts, _counted):
        return [[3.0, 4.0] for _ in texts]

    async def run_alone(self, function, *args):
        return function(*args)


def service(normalize: bool = True, max_inputs: int = 8) -> EmbeddingService:
    """The service's own methods around stand-ins for the model (a tokenizer and a batcher that record calls)."""
    svc = object.__new__(EmbeddingService)
    svc.settings = SimpleNamespace(max_inputs_per_request=max_inputs, truncation="truncate")
    svc.info = SimpleNamespace(name="m", normalize=normalize)
    svc.max_tokens, svc.vocabulary = 256, 100
    svc.tokenizer, svc.batcher = RecordingTokenizer(), Batcher()
    svc.metrics = SimpleNamespace(observe_request=lambda *_: None)
    svc.reranker = SimpleNamespace(rerank=lambda _query, documents: [(i, 1.0) for i in range(len(documents))])
    return svc


async def test_tokenizing_and_decoding_run_off_the_event_loop():
    svc = service()
    texts = await svc.texts_of([[1, 2, 3]])
    await svc.embed(texts)
    assert svc.tokenizer.threads and threading.main_thread() not in svc.tokenizer.threads


async def test_tei_normalize():
    with pytest.raises(APIError, match="normalize"):
        await service(normalize=True).embed(["a"], normalize=False)
    raw = service(normalize=False)
    assert (await raw.embed(["a"])).vectors == [[3.0, 4.0]]
    assert (await raw.embed(["a"], normalize=True)).vectors == [pytest.approx([0.6, 0.8])]


def test_rerank_documents_are_bounded_per_request():
    svc = service(max_inputs=2)
    with pytest.raises(APIError, match="at most 2") as refused:
        asyncio.run(svc.rerank("q", ["a", "b", "c"]))
    assert refused.value.param == "documents"
    assert asyncio.run(svc.rerank("q", ["a", "b"])) == [(0, 1.0), (1, 1.0)]
