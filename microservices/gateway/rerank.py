"""The rerank stage: a cross-encoder scores the retrieved chunks against the question, the best `top_n` are kept.

It calls TEI's `/rerank` ({"query", "texts"} -> [{"index", "score"}]), which is what OPEA's ChatQnA calls and what
both TEI and this stack's embedding service (with RERANK_MODEL_PATH) serve.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from ovgenai_common.errors import APIError, ErrorKind

logger = logging.getLogger(__name__)
DISABLED = "off: no reranker is configured (RERANK_SERVER_ENDPOINT); the retrieval order is final"


class Reranker:
    def __init__(self, client: httpx.AsyncClient, endpoint: str, api_key: str, timeout: float):
        self.client = client
        self.url = endpoint.rstrip("/").removesuffix("/v1") + "/rerank"
        self.headers = {"Authorization": f"Bearer {api_key}"}
        self.timeout = timeout

    async def _post(self, query: str, texts: list[str], timeout: float) -> list[dict[str, Any]]:
        # TEI refuses inputs longer than its model takes unless asked to truncate; this stack's service truncates.
        body = {"query": query, "texts": texts, "truncate": True}
        # Errors name the service, not its address (clients need not learn the internal network); the log has it.
        try:
            response = await self.client.post(self.url, json=body, headers=self.headers, timeout=timeout)
        except httpx.TimeoutException as error:
            logger.warning("rerank service at %s timed out", self.url)
            raise APIError(ErrorKind.TIMEOUT, "The rerank service timed out.") from error
        except httpx.HTTPError as error:
            logger.warning("rerank service at %s is unavailable: %s", self.url, type(error).__name__)
            raise APIError(ErrorKind.UNAVAILABLE,
                           f"The rerank service is unavailable ({type(error).__name__}).") from error
        if response.status_code != 200:
            logger.warning("rerank service at %s answered %d", self.url, response.status_code)
            kind = ErrorKind.UNAVAILABLE if response.status_code >= 500 or response.status_code == 404 else \
                ErrorKind.INVALID_REQUEST
            raise APIError(kind, f"The rerank service answered {response.status_code}: {response.text[:300]}")
        ranked = response.json()
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
            await self._post("health", ["health"], 3)
        except APIError as error:
            return False, error.message
        return True, "ok"
