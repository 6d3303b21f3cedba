"""The embedding service's own methods around stand-ins for the model process and the batcher: a model that counts
3 tokens a text, decodes ids to "x" each, scores every document 1 and records its calls, and a batcher that embeds
every text as [3, 4] (counting 3 tokens a text itself for a request it takes at once)."""

from __future__ import annotations

from types import SimpleNamespace

from microservices.embedding.service import EmbeddingService


class Model:
    """What the service asks of the model process (ModelProcess), answered here; `calls` records them."""

    alive = True

    def __init__(self):
        self.calls: list[tuple[str, tuple]] = []
        self.failure: Exception | None = None  # raised by the next call instead of answering

    def _answer(self, method: str, *args):
        self.calls.append((method, args))
        if self.failure is not None:
            raise self.failure
        return {"count_tokens": lambda texts: [3] * len(texts),
                "decode": lambda token_ids: ["x" * len(ids) for ids in token_ids],
                "rerank": lambda _query, documents: [(i, 1.0) for i in range(len(documents))]}[method](*args)

    async def count_tokens(self, texts):
        return self._answer("count_tokens", texts)

    async def decode(self, token_ids):
        return self._answer("decode", token_ids)

    async def run(self, method, *args):
        return self._answer(method, *args)


class Batcher:
    """Embeds every text as [3, 4]; a request `takes_at_once` when `at_once` says so, and is then counted 3 tokens a
    text in the same call (`uncounted` records those calls)."""

    alive = True

    def __init__(self):
        self.at_once = False
        self.uncounted: list[tuple[list[str], int | None]] = []

    def takes_at_once(self, _texts):
        return self.at_once

    async def submit(self, texts, _counted):
        return [[3.0, 4.0] for _ in texts]

    async def submit_uncounted(self, texts, limit):
        self.uncounted.append((texts, limit))
        refused = limit is not None and 3 > limit
        return [3] * len(texts), None if refused else [[3.0, 4.0] for _ in texts]


def service(normalize: bool = True, max_inputs: int = 8) -> EmbeddingService:
    """The service's own methods around stand-ins for the model process and the batcher."""
    svc = object.__new__(EmbeddingService)
    svc.settings = SimpleNamespace(max_inputs_per_request=max_inputs, truncation="truncate")
    svc.info = SimpleNamespace(name="m", normalize=normalize)
    svc.max_tokens, svc.vocabulary, svc.dimensions = 256, 100, 2
    svc.model, svc.batcher, svc.has_reranker = Model(), Batcher(), True
    svc.metrics = SimpleNamespace(observe_request=lambda *_: None)
    return svc

