"""The rerank stage: a cross-encoder scores the retrieved chunks against the question, the best `top_n` are kept.

It calls TEI's `/rerank` ({"query", "texts"} -> [{"index", "score"}]), which is what OPEA's ChatQnA calls and what
both TEI and this stack's embedding service (with RERANK_MODEL_PATH) serve.
"""

from __future__ import annotations

from typing import Any

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.upstream import Upstream

DISABLED = "off: no reranker is configured (RERANK_SERVER_ENDPOINT); the retrieval order is final"
HEALTH_TIMEOUT = 3.0


class Reranker:
    def __init__(self, upstream: Upstream, timeout: float):
        self.upstream = upstream
        self.timeout = timeout

    async def _post(self, query: str, texts: list[str], timeout: float) -> list[dict[str, Any]]:
        # TEI refuses inputs longer than its model takes unless asked to truncate; this stack's service truncates.
        body = {"query": query, "texts": texts, "truncate": True}
        response = await self.upstream.request("POST", "/rerank", json=body, timeout=timeout)
        try:
            ranked = response.json()
        except ValueError:
            ranked = None
        if not isinstance(ranked, list) or not all(isinstance(r, dict) and {"index", "score"} <= r.keys()
                                                   for r in ranked):
            raise APIError(ErrorKind.UPSTREAM, "The rerank service answered an unexpected body.")
        return ranked

    async def rank(self, query: str, texts: list[str]) -> list[tuple[int, float]]:
        """(index into texts, score), best first."""
        ranked = await self._post(query, texts, self.timeout)
        pairs = [(int(r["index"]), float(r["score"])) for r in ranked if 0 <= int(r["index"]) < len(texts)]
        return sorted(pairs, key=lambda pair: pair[1], reverse=True)

    async def check(self) -> tuple[bool, str]:
        """Whether it reranks: a one-text call, since a service can be healthy without a rerank model (404)."""
        try:
            await self._post("health", ["health"], HEALTH_TIMEOUT)
        except APIError as error:
            return False, error.message
        return True, "ok"
