"""The gateway's answers about its reranker (errors, and health, which is open to anyone who reaches the gateway)
name the service, never its internal address; the log has the address (the other dependencies' probes:
tests/ovgenai_common/test_upstream.py)."""

from __future__ import annotations

import httpx
import pytest

from microservices.gateway.rerank import Reranker
from ovgenai_common.errors import APIError
from ovgenai_common.upstream import Upstream

ADDRESS = "http://10.9.8.7:6000"


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.mark.parametrize("answer", [refuse, lambda _: httpx.Response(500, text="boom"),
                                    lambda _: httpx.Response(200, json={"unexpected": True})])
async def test_rerank_failures_do_not_name_the_address(answer, caplog):
    upstream = Upstream("rerank service", ADDRESS, api_key="key", transport=httpx.MockTransport(answer))
    with pytest.raises(APIError) as failed:
        await Reranker(upstream, 5).rank("q", ["a", "b"])
    ok, reason = await Reranker(upstream, 5).check()
    await upstream.aclose()
    assert "rerank service" in failed.value.message and "10.9.8.7" not in failed.value.message
    assert not ok and "10.9.8.7" not in reason
    if answer is refuse:
        assert "10.9.8.7" in caplog.text
