"""The rerank stage: a cross-encoder scores the retrieved chunks against the question, the best `top_n` are kept.

It calls TEI's `/rerank` ({"query", "texts"} -> [{"index", "score"}]), which is what OPEA's ChatQnA calls and what
both TEI and this stack's embedding service (with RERANK_MODEL_PATH) serve. Its readiness is the rerank service's
own health check (router.py), never a rerank: a service without a rerank model is found by the first rerank, which
answers an error naming the rerank service.
"""

from __future__ import annotations

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.upstream import Upstream

DISABLED = "off: no reranker is configured (RERANK_SERVER_ENDPOINT); the retrieval order is final"


class Reranker:
    def __init__(self, upstream: Upstream, timeout: float):
        self.upstream = upstream
        self.timeout = timeout

    async def rank(self, query: str, texts: list[str]) -> list[tuple[int, float]]:
        """(index into texts, score), best first."""
        # TEI refuses inputs longer than its model takes unless asked to truncate; this stack's service truncates.
        body = {"query": query, "texts": texts, "truncate": True}
        response = await self.upstream.request("POST", "/rerank", json=body, timeout=self.timeout)
        try:
            ranked = response.json()
        except ValueError:
            ranked = None
        if not isinstance(ranked, list) or not all(isinstance(r, dict) and {"index", "score"} <= r.keys()
                                                   for r in ranked):
            raise APIError(ErrorKind.UPSTREAM, "The rerank service answered an unexpected body.")
        pairs = [(int(r["index"]), float(r["score"])) for r in ranked if 0 <= int(r["index"]) < len(texts)]
        return sorted(pairs, key=lambda pair: pair[1], reverse=True)
