"""A request that breaks its replica (the backend read it, then its connection was reset) is not sent on to the next
one, and a replica's refusal to admit (429, nothing ran) is: on stand-in backends."""

from __future__ import annotations

import httpx
import pytest

from tests.llm.stand_ins import StandInBackend
from tests.support.servers import RemoteServer


@pytest.fixture
def replicas():
    stand_ins = [StandInBackend("reset"), StandInBackend("reset")]
    yield stand_ins
    for stand_in in stand_ins:
        stand_in.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_that_breaks_its_replica_is_not_sent_to_the_next(replicas, stream):
    """The backend read the request, then its connection was reset (its engine died on it): the request went on to
    the next replica, and the next, and took every one down in turn."""
    env = {"LLM_ENDPOINT": ",".join(replica.url for replica in replicas), "LLM_MODEL": "m"}
    with RemoteServer("ovgenai_services.llm", env=env, health_path="/live") as llm:
        reply = httpx.post(llm.url + "/v1/chat/completions", json={"messages": "hi", "stream": stream}, timeout=30)
    assert sum(replica.requests for replica in replicas) == 1
    assert reply.status_code == 502, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "upstream_error", error
    assert "127.0.0.1" not in reply.text


def test_a_refusal_to_admit_goes_to_the_next_replica():
    """A 429 ran nothing: the other replica serves the request."""
    busy, free = StandInBackend(429), StandInBackend("ok")
    try:
        env = {"LLM_ENDPOINT": f"{busy.url},{free.url}", "LLM_MODEL": "m", "LLM_ROUTING": "round_robin"}
        with RemoteServer("ovgenai_services.llm", env=env, health_path="/live") as llm:
            replies = [httpx.post(llm.url + "/v1/chat/completions", json={"messages": "hi", "stream": False},
                                  timeout=30) for _ in range(2)]
    finally:
        busy.stop()
        free.stop()
    assert [reply.status_code for reply in replies] == [200, 200]
    assert (busy.requests, free.requests) == (1, 2)  # round robin started at the busy one once
