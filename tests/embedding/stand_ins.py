"""The embedding service's own methods around stand-ins for the model process and the batcher: a model that decodes
ids to "x" each, scores every document 1 and records its calls, and a batcher that counts 3 tokens a text and embeds
every text as [3, 4] (none over its limit) and records its calls."""

from __future__ import annotations

from types import SimpleNamespace

from ovgenai_services.embedding.inputs import InputRules
from ovgenai_services.embedding.service import EmbeddingService


class Model:
    """What the service asks of the model process (ModelProcess) itself, answered here; `calls` records them."""

    alive = True

    def __init__(self):
        self.calls: list[tuple[str, tuple]] = []
        self.failure: Exception | None = None  # raised by the next call instead of answering

    def _answer(self, method: str, *args):
        self.calls.append((method, args))
        if self.failure is not None:
            raise self.failure
        return {"decode": lambda token_ids: ["x" * len(ids) for ids in token_ids],
                "rerank": lambda _query, documents: [(i, 1.0) for i in range(len(documents))]}[method](*args)

    async def decode(self, token_ids):
        return self._answer("decode", token_ids)

    async def run(self, method, *args):
        return self._answer(method, *args)


class Batcher:
    """Counts 3 tokens a text and embeds every text as [3, 4], or none where 3 is over the request's limit (as the
    real one answers: the counts so far, here all of them, and no vectors); `submitted` records each request's texts
    and limit. `failure` is raised instead of answering."""

    alive = True

    def __init__(self):
        self.submitted: list[tuple[list[str], int | None]] = []
        self.cuts: list[int | None] = []  # each request's cut, in order
        self.failure: Exception | None = None

    async def submit(self, texts, limit=None, cut=None):
        self.submitted.append((texts, limit))
        self.cuts.append(cut)
        if self.failure is not None:
            raise self.failure
        refused = limit is not None and 3 > limit
        return [3] * len(texts), None if refused else [[3.0, 4.0] for _ in texts]


def service(normalize: bool = True, max_inputs: int = 8, max_tokens: int = 256, dimensions: int = 2,
            truncate: bool = True, **rules) -> EmbeddingService:
    """The service's own methods around stand-ins for the model process and the batcher; `rules`: InputRules'
    prompts and Matryoshka sizes."""
    svc = object.__new__(EmbeddingService)
    svc.rules = InputRules("m", max_inputs, max_tokens, dimensions, 100, normalize, **rules)
    svc.truncate = truncate
    svc.model, svc.batcher, svc.has_reranker = Model(), Batcher(), True
    svc.metrics = SimpleNamespace(observe_request=lambda *_: None)
    return svc
