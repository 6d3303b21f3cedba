"""The rerank stage's client: TEI's /rerank asked with truncation, its answer ranked best first and kept within
the texts sent; its errors name the service, never its internal address, which the log has (its readiness is the
rerank service's own health check: tests/gateway/test_router.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from ovgenai_common.errors import APIError
from ovgenai_common.upstream import Upstream
from ovgenai_services.gateway.rerank import Reranker

ADDRESS = "http://10.9.8.7:6000"


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.mark.parametrize("answer", [refuse, lambda _: httpx.Response(500, text="boom"),
                                    lambda _: httpx.Response(200, json={"unexpected": True})])
async def test_rerank_failures_do_not_name_the_address(answer, caplog):
    upstream = Upstream("rerank service", ADDRESS, api_key="key", transport=httpx.MockTransport(answer))
    with pytest.raises(APIError) as failed:
        await Reranker(upstream, 5).rank("q", ["a", "b"])
    await upstream.aclose()
    assert "rerank service" in failed.value.message and "10.9.8.7" not in failed.value.message
    if answer is refuse:
        assert "10.9.8.7" in caplog.text


async def test_texts_are_ranked_best_first_and_indexes_outside_them_dropped():
    sent = []

    def tei(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=[{"index": 0, "score": 0.1}, {"index": 2, "score": 0.9},
                                         {"index": 1, "score": 0.5}, {"index": 7, "score": 1.0}])

    upstream = Upstream("rerank service", ADDRESS, transport=httpx.MockTransport(tei))
    reranker = Reranker(upstream, 5)
    assert await reranker.rank("q", ["a", "b", "c"]) == [(2, 0.9), (1, 0.5), (0, 0.1)]
    assert sent == [{"query": "q", "texts": ["a", "b", "c"], "truncate": True}]
    await upstream.aclose()
