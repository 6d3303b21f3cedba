"""Routing among backend replicas: the policy alone (replicas.py), then through the service's client against
stand-in backends, for what real replicas produce only by chance (a replica refusing connections mid-run, a hot
prefix). The real replicas' test is tests/llm/system/test_replica_routing.py."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.llm.replicas import Balancer, prompt_prefix, rendezvous_order
from ovgenai_services.llm.service import Backend
from ovgenai_services.llm.settings import LLMSettings

SYSTEM = "You are the canal authority's assistant. " * 10  # longer than the routing prefix


@dataclass
class Load:
    in_flight: int = 0
    down: bool = False


def chat(system: str, question: str) -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}


def test_the_prefix_is_what_the_model_reads_first():
    assert prompt_prefix(chat("abc", "q"), 8) == "system\na"
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]}]}
    assert prompt_prefix(parts, 100) == "user\nhi\n"
    assert prompt_prefix({"prompt": "once upon"}, 4) == "once"
    assert prompt_prefix({"prompt": [[1, 2, 3]]}, 3) == "1,2"
    assert prompt_prefix({"prompt": 7}, 3) == "" and prompt_prefix([1], 3) == ""


def test_requests_sharing_a_prefix_go_to_one_replica_and_other_prefixes_spread():
    balancer, idle = Balancer(3, prefix_chars=256), [Load(), Load(), Load()]
    firsts = {balancer.order(chat(SYSTEM, f"question {i}"), idle)[0] for i in range(20)}
    assert len(firsts) == 1
    spread = {balancer.order(chat(f"system prompt number {i}", "q"), idle)[0] for i in range(60)}
    assert spread == {0, 1, 2}


def test_a_replica_leaving_moves_only_the_keys_it_held():
    keys = [f"prefix {i}" for i in range(300)]
    before = {key: rendezvous_order(key, 3)[0] for key in keys}
    after = {key: [i for i in rendezvous_order(key, 3) if i != 2][0] for key in keys}  # replica 2 gone
    assert all(after[key] == before[key] for key in keys if before[key] != 2)


def test_a_hot_prefix_overflows_to_the_next_replica_past_the_load_bound():
    balancer = Balancer(2, prefix_chars=256, load_factor=0.25)
    favourite = balancer.order(chat(SYSTEM, "q"), [Load(), Load()])[0]
    loads = [Load(), Load()]
    loads[favourite].in_flight = 2  # bound: ceil(1.25 * 3 / 2) = 2 requests
    assert balancer.order(chat(SYSTEM, "q"), loads)[0] == 1 - favourite
    loads[favourite].in_flight = 1
    assert balancer.order(chat(SYSTEM, "q"), loads)[0] == favourite


def test_a_down_replica_is_tried_last_and_round_robin_takes_turns():
    balancer = Balancer(2, prefix_chars=256)
    favourite = balancer.order(chat(SYSTEM, "q"), [Load(), Load()])[0]
    loads = [Load(), Load()]
    loads[favourite].down = True
    assert balancer.order(chat(SYSTEM, "q"), loads) == [1 - favourite, favourite]
    turns = Balancer(3, policy="round_robin")
    assert [turns.order(chat(SYSTEM, "q"), [Load()] * 3)[0] for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def backends(answer) -> Backend:
    settings = LLMSettings(llm_endpoint="http://a:1, http://b:2", health_cache_seconds=60)
    return Backend(settings, transport=httpx.MockTransport(answer))


async def test_an_unreachable_replica_is_skipped_and_the_request_served_by_the_next():
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.host)
        if request.url.host == "a":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"ok": True})

    backend = backends(answer)
    for question in ("one", "two", "three", "four"):
        response = await backend.post("/v1/chat/completions", chat(question, question))
        assert response.json() == {"ok": True}
    await backend.close()
    assert set(sent) == {"a", "b"} and sent.count("a") == 1  # after its failure, a is tried last
    assert [replica.in_flight for replica in backend.replicas] == [0, 0]


def broken(request: httpx.Request) -> httpx.Response:
    """A backend that read the request, then lost the connection (its engine died on it)."""
    raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)


@pytest.mark.parametrize(("answer", "status"), [
    (400, 400), (500, 502), (503, 503), (504, 504),  # 503: this backend's "engine stopped while generating" too
    (broken, 502),
    (httpx.ReadTimeout, 504),
])
async def test_a_request_that_may_have_run_is_not_sent_again_elsewhere(answer, status):
    sent: list[str] = []

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.host)
        if isinstance(answer, int):
            return httpx.Response(answer, json={"error": {"message": "no", "type": "x"}})
        if answer is httpx.ReadTimeout:
            raise httpx.ReadTimeout("timed out", request=request)
        return answer(request)

    backend = backends(reply)
    with pytest.raises(APIError) as raised:
        await backend.post("/v1/chat/completions", chat(SYSTEM, "q"))
    await backend.close()
    assert raised.value.status == status and len(sent) == 1, raised.value.message
    assert [replica.in_flight for replica in backend.replicas] == [0, 0]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_to_admit_goes_to_the_next_replica_and_a_busy_one_is_not_down(stream):
    """A 429 ran nothing: the next replica serves the request; all refusing, the client gets the 429."""
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.host)
        if request.url.host == sent[0]:
            return httpx.Response(429, headers={"Retry-After": "3"}, json={"error": {"message": "busy", "type": "x"}})
        return httpx.Response(200, json={"ok": True})

    backend = backends(answer)
    response = await backend.request("POST", "/v1/chat/completions", chat(SYSTEM, "q"), stream=stream)
    assert response.status_code == 200 and len(sent) == 2 and len(set(sent)) == 2
    assert not any(replica.down for replica in backend.replicas)
    await backend.release(response)
    everyone_busy = backends(lambda _: httpx.Response(429, json={"error": {"message": "busy", "type": "x"}}))
    with pytest.raises(APIError) as refused:
        await everyone_busy.post("/v1/chat/completions", chat(SYSTEM, "q"))
    assert refused.value.status == 429 and refused.value.kind is ErrorKind.OVERLOADED
    await backend.close()
    await everyone_busy.close()


async def test_every_replica_unreachable_is_one_503_and_health_names_each():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    backend = backends(refuse)
    with pytest.raises(Exception) as raised:
        await backend.post("/v1/chat/completions", chat(SYSTEM, "q"))
    assert getattr(raised.value, "status", None) == 503
    ok, reason = await backend.health()
    await backend.close()
    assert not ok and "replica 1:" in reason and "replica 2:" in reason


async def test_a_stream_counts_against_its_replica_until_its_relay_ends():
    async def done():
        yield b"data: [DONE]\n\n"

    backend = backends(lambda _: httpx.Response(200, content=done()))
    response = await backend.open_stream("/v1/chat/completions", chat(SYSTEM, "q"))
    assert sorted(replica.in_flight for replica in backend.replicas) == [0, 1]
    assert b"".join([chunk async for chunk in backend.relay(response)]) == b"data: [DONE]\n\n"
    assert [replica.in_flight for replica in backend.replicas] == [0, 0]
    await backend.close()


def test_an_empty_endpoint_list_is_a_settings_error():
    with pytest.raises(ValueError, match="at least one backend URL"):
        LLMSettings(llm_endpoint=" , ")
