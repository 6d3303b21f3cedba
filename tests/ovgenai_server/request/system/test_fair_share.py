"""No client can take the backend from the others: one request's prompt list is served in turns instead of holding
every place, and a client that floods the server neither turns another client's requests into 429s nor makes them
wait behind its backlog. Clients are told apart by address here (127.0.0.1 and 127.0.0.2), as without an API key."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, RemoteServer, wait_until
from tests.support.waiting import until


def client(url: str, address: str) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address, limits=httpx.Limits(max_connections=256))
    return httpx.AsyncClient(transport=transport, base_url=url, timeout=300)


@pytest.fixture(scope="module")
def small_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    """4 running and 124 waiting: 128 places, the last 32 kept for clients below their share."""
    args = ["--model", str(MODELS), "--max_num_seqs", "4", "--max_waiting_requests", "124", "--max_queue_wait", "0"]
    with RemoteServer("ovgenai_server", args) as server:
        yield server


def test_one_request_s_prompt_list_does_not_take_every_place(backend, default_model):
    """768 prompts (30 KB) held all 768 places of the default server: any other client's request was a 429 until it
    ended. A request takes at most a quarter of max_num_seqs at once; the rest of its list waits for its turns."""
    answered: dict = {}

    def big() -> None:
        answered["reply"] = httpx.post(backend.url + "/v1/completions", timeout=300, json={
            "model": default_model, "prompt": ["x"] * 768, "max_tokens": 16, "ignore_eos": True})

    sender = threading.Thread(target=big)
    sender.start()
    def in_flight() -> float:
        return sum(metric(backend.url, f"ovgenai:num_requests_{kind}") for kind in ("running", "waiting"))

    wait_until(in_flight, 60, interval=0.01, message="the list being served")

    async def other() -> httpx.Response:
        async with client(backend.url, "127.0.0.2") as http:
            return await http.post("/v1/chat/completions", json={
                "model": default_model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})

    reply = asyncio.run(other())
    sender.join()
    assert reply.status_code == 200, reply.text
    assert answered["reply"].status_code == 200 and len(answered["reply"].json()["choices"]) == 768


def test_a_flooding_client_neither_refuses_nor_delays_another_clients_requests(small_backend, default_model):
    body = {"model": default_model, "prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": True}
    finished: list[str] = []

    async def ask(http: httpx.AsyncClient, name: str) -> int:
        reply = await http.post("/v1/completions", json=body)
        if reply.status_code == 200:
            finished.append(name)
        return reply.status_code

    async def scenario() -> tuple[list[int], list[int]]:
        async with client(small_backend.url, "127.0.0.1") as flood, client(small_backend.url, "127.0.0.2") as other:
            flooding = [asyncio.create_task(ask(flood, f"a{i}")) for i in range(110)]
            await until(lambda: metric(small_backend.url, "ovgenai:num_requests_waiting") >= 40, 60,
                        "40 of the flood's requests waiting", interval=0.01)
            asked = await asyncio.gather(*(ask(other, f"b{i}") for i in range(3)))
            return list(await asyncio.gather(*flooding)), list(asked)

    flooded, asked = asyncio.run(scenario())
    assert flooded.count(200) <= 96 and 429 in flooded  # the flooding client takes at most 128 - 32 places
    assert asked == [200, 200, 200]  # the other client's requests are all admitted ...
    served_a = [name for name in finished if name.startswith("a")]
    for name in ("b0", "b1", "b2"):  # ... and each is served before most of the backlog it found
        assert finished.index(name) < len(served_a) // 2, finished


def test_the_event_loop_answers_while_four_prompts_at_the_body_limit_are_tokenized(backend, default_model):
    """The tokenizer holds the GIL for as long as a call lasts: four 4 MiB prompts tokenized whole on worker threads
    held /live for 0.18-0.25 s. Now a prompt certainly past the context is refused without being tokenized whole (at
    least so many tokens, counted from its length or piece by piece: request/prompts.py), and what the loop still does
    (the body's checks, its parse) is ~25 ms a body. /live's worst latency is printed (`pytest -s`), not asserted: it
    depends on the machine."""
    words = "the quick brown fox jumps over the lazy dog while eleven owls sing".split()
    prompt = " ".join(words[i % len(words)] for i in range(800_000))[: 4 * 2**20 - 4096]
    probes: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=backend.url, timeout=30) as http:
            while not done.is_set():
                started = time.perf_counter()
                http.get("/live").raise_for_status()
                probes.append(time.perf_counter() - started)

    async def four() -> list[httpx.Response]:
        async with client(backend.url, "127.0.0.1") as http:
            return list(await asyncio.gather(*(http.post("/v1/completions", json={
                "model": default_model, "prompt": prompt, "max_tokens": 1}) for _ in range(4))))

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        replies = asyncio.run(four())
    finally:
        done.set()
        prober.join()
    print(f"/live worst {max(probes) * 1000:.1f} ms over {len(probes)} probes")  # noqa: T201 - the docstring's figure
    assert [reply.status_code for reply in replies] == [400] * 4, replies[0].text  # far past the context
    # refused from its length or counted piece by piece, never tokenized whole
    assert all("The prompt has at least" in reply.json()["error"]["message"] for reply in replies)
    assert probes


@pytest.mark.parametrize("posing_as", ["Authorization", "X-Forwarded-For"])
def test_a_client_cannot_pose_as_many_by_what_its_requests_say(small_backend, default_model, posing_as):
    """Made-up bearer values took a backend without a key from its other clients: each value counted as a client of
    its own, with a share of its own. X-Forwarded-For was believed from loopback the same way. Now both are one client,
    held to three quarters of the places (96 of 128), and another client is admitted."""
    body = {"model": default_model, "prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True}

    def posing(index: int) -> dict[str, str]:
        return {"Authorization": f"Bearer made-up-{index}"} if posing_as == "Authorization" else {
            "X-Forwarded-For": f"10.0.0.{index}"}

    def in_flight() -> float:
        return metric(small_backend.url, "ovgenai:num_requests_running") + metric(
            small_backend.url, "ovgenai:num_requests_waiting")

    async def scenario() -> tuple[int, bool]:  # how many of the flood were refused; whether the other got in
        async with client(small_backend.url, "127.0.0.1") as flood, client(small_backend.url, "127.0.0.2") as other:
            flooding = [asyncio.create_task(flood.post("/v1/completions", json=body, headers=posing(i % 13)))
                        for i in range(130)]
            await until(lambda: sum(task.done() for task in flooding) + in_flight() >= 130, 120,
                        "every request of the flood admitted or refused", interval=0.05)
            statuses = [task.result().status_code for task in flooding if task.done()]
            assert set(statuses) <= {429}, statuses  # nothing else ends while the admitted ones run
            refused, held = len(statuses), in_flight()
            # Admitted is in the line (its answer comes after the flood's running requests, which take minutes
            # here): counted as waiting, or already answered, never refused.
            asking = asyncio.create_task(other.post("/v1/completions", json={**body, "max_tokens": 2}))
            await until(lambda: asking.done() or in_flight() > held, 120, "the other client's request admitted",
                        interval=0.05)
            admitted = not asking.done() or asking.result().status_code == 200
            for task in [*flooding, asking]:
                task.cancel()
            await asyncio.gather(*flooding, asking, return_exceptions=True)
            return refused, admitted

    wait_until(lambda: in_flight() == 0, 120, message="the backend idle before the flood")
    refused, admitted = asyncio.run(scenario())
    wait_until(lambda: in_flight() == 0, 120, message="the flood's requests gone with their clients")
    assert refused >= 130 - 96, refused  # one client: a quarter of the places kept for the others ...
    assert admitted  # ... and the other client admitted


def test_a_beam_search_holds_no_other_request_back(backend, default_model):
    """A beam search of 20 took 20 places, which admission read as 19 requests waiting in the engine (the engine
    counts a group of beams as one): no other request went in until it ended. On the session's backend: a batch of
    max_num_seqs 4 could not hold both at once anyway."""
    async def scenario() -> tuple[int, bool]:
        async with client(backend.url, "127.0.0.1") as one, client(backend.url, "127.0.0.2") as other:
            beams = asyncio.create_task(one.post("/v1/completions", json={
                "model": default_model, "prompt": "Once upon a time", "best_of": 20, "n": 1, "max_tokens": 400,
                "ignore_eos": True}))
            await until(lambda: metric(backend.url, "ovgenai:num_requests_running") >= 1 or beams.done(), 60,
                        "the beam search running", interval=0.05)
            asked = await other.post("/v1/chat/completions", json={
                "model": default_model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
            still_running = not beams.done()
            beams.cancel()
            await asyncio.gather(beams, return_exceptions=True)
            return asked.status_code, still_running

    status, beams_still_running = asyncio.run(scenario())
    assert status == 200 and beams_still_running  # answered beside the beam search, not after it
