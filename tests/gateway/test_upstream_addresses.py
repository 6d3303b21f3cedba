"""The gateway's answers about its dependencies (errors, and health, which is open to anyone who reaches the
gateway) name the failing service, never its internal address; the log has the address."""

from __future__ import annotations

import httpx
import pytest

from microservices.gateway.app import DependencyProbe
from microservices.gateway.rerank import Reranker
from ovgenai_common.errors import APIError

ADDRESS = "http://10.9.8.7:6000"


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.mark.parametrize("answer", [refuse, lambda _: httpx.Response(500, text="boom"),
                                    lambda _: httpx.Response(200, json={"unexpected": True})])
async def test_rerank_failures_do_not_name_the_address(answer, caplog):
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(APIError) as failed:
            await Reranker(client, ADDRESS, "key", 5).rank("q", ["a", "b"])
        ok, reason = await Reranker(client, ADDRESS, "key", 5).check()
    assert "rerank service" in failed.value.message and "10.9.8.7" not in failed.value.message
    assert not ok and "10.9.8.7" not in reason
    if answer is refuse:
        assert "10.9.8.7" in caplog.text


@pytest.mark.parametrize("answer", [refuse, lambda _: httpx.Response(503)])
async def test_health_reasons_do_not_name_the_address(answer, caplog):
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        ok, reason = await DependencyProbe(client).check(ADDRESS)
    assert not ok and reason and "10.9.8.7" not in reason
    assert "10.9.8.7" in caplog.text
