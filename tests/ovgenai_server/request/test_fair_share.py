"""The places of a model shared between clients (request/fair_share.py), on the fake runtime: requests enter the engine
in turns, client by client, only while the engine has room; a request that leaves gives its places back."""

from __future__ import annotations

import asyncio

import pytest

from ovgenai_server.request import fair_share
from ovgenai_server.request.fair_share import FairShare
from tests.support.fake_engine import FakeRuntime
from tests.support.waiting import settle, until


class Engine:
    """The fake runtime's counts moved by hand: a request registered in the engine, then running."""

    def __init__(self):
        self.runtime = FakeRuntime()
        self.entered: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    async def request(self, share: FairShare, client: str, name: str) -> None:
        """Admitted for `client`, then in the engine once its turn comes, until released; its places given back."""
        self.release[name] = asyncio.Event()
        ticket = share.admit(client, 1)
        try:
            async with share.turn(ticket, 1, [1, 2]):
                self.entered.append(name)
                await self.release[name].wait()
        finally:
            ticket.release()


async def test_waiting_requests_enter_the_engine_client_by_client(monkeypatch):
    monkeypatch.setattr(fair_share, "POLL_SECONDS", 0)  # the poller looks at every turn of the loop: settle() runs it
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=2, lookahead=1)
    tasks = [asyncio.create_task(engine.request(share, "a", "a1"))]
    await until(lambda: engine.entered == ["a1"])  # the engine now holds one waiting request: no room
    for client, name in (("a", "a2"), ("a", "a3"), ("b", "b1")):
        tasks.append(asyncio.create_task(engine.request(share, client, name)))
        await asyncio.sleep(0)
    await until(lambda: share.queued + len(engine.entered) == 4)  # all three arrived: waiting, unless let in
    await settle()
    assert engine.entered == ["a1"]
    engine.runtime.stats.running = 1  # the engine runs a1: one more may wait in it
    await until(lambda: len(engine.entered) == 2)
    engine.runtime.stats.running = 2
    await until(lambda: len(engine.entered) == 3)
    assert engine.entered == ["a1", "a2", "b1"]  # b's one request before a's third
    for event in engine.release.values():
        event.set()
    engine.runtime.stats.running = 0
    await asyncio.gather(*tasks)
    assert engine.entered == ["a1", "a2", "b1", "a3"]
    assert share.held == {} and share.running == 0


async def test_a_request_that_leaves_while_waiting_gives_its_places_back():
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=1, lookahead=1)
    first = asyncio.create_task(engine.request(share, "a", "a1"))
    await until(lambda: engine.entered == ["a1"])
    waiting = asyncio.create_task(engine.request(share, "b", "b1"))
    await until(lambda: share.held.get("b") == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert share.held == {"a": 1} and share.ahead("c") == []
    engine.release["a1"].set()
    await first
    assert share.held == {} and share.running == 0


async def test_the_prompts_ahead_are_those_served_before_the_clients_next_turn():
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=1, lookahead=1)
    tasks = [asyncio.create_task(engine.request(share, "a", "a1"))]
    await until(lambda: engine.entered == ["a1"])
    tasks += [asyncio.create_task(engine.request(share, "a", f"a{i}")) for i in (2, 3, 4)]
    await until(lambda: share.held.get("a") == 4)
    assert len(share.ahead("b")) == 1  # a's next one, then b's own turn
    for event in engine.release.values():
        event.set()
    engine.runtime.stats.running = 1
    await asyncio.gather(*tasks)


def test_a_ticket_holds_its_places_until_released_once_or_dropped():
    share = FairShare(FakeRuntime(), capacity=10, running=4)
    ticket = share.admit("a", 3)
    assert share.held == {"a": 3}
    ticket.release()
    ticket.release()
    assert share.held == {}
    share.admit("b", 2)  # never run, dropped at once: its places come back with it
    assert share.held == {}


async def test_a_request_that_leaves_as_its_turn_comes_never_wedges_admission(monkeypatch):
    """A client that disconnects while queued cancels its wait at once, but its request's own clean-up runs a turn of
    the loop later; the poller could give that cancelled wait its turn in between. It raised InvalidStateError,
    left an empty queue at the head of the line, and every later request waited forever (IndexError each look)."""
    monkeypatch.setattr(fair_share, "POLL_SECONDS", 0)
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=1, lookahead=1)
    first = asyncio.create_task(engine.request(share, "a", "a1"))
    await until(lambda: engine.entered == ["a1"])
    leaving = asyncio.create_task(engine.request(share, "b", "b1"))
    await until(lambda: share.queued == 1)
    engine.runtime.stats.running = 1  # room for one more: the poller's next look lets b1 in ...
    leaving.cancel()  # ... but its client has just left, before the look
    with pytest.raises(asyncio.CancelledError):
        await leaving
    later = asyncio.create_task(engine.request(share, "c", "c1"))
    await until(lambda: "c1" in engine.entered)
    assert engine.entered == ["a1", "c1"] and share.running == 2
    for event in engine.release.values():
        event.set()
    await asyncio.gather(first, later)
    assert share.held == {} and share.running == 0 and share.queued == 0


async def test_the_watchdog_rebuilds_a_line_that_stopped_moving_and_says_why():
    """Requests wait, the engine has room, and nothing lets them in (here: the poller gone, as an exception would end
    it): past `stall_seconds` the watchdog counts a stall, says why, and the rebuilt line lets them in."""
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=1, lookahead=1, stall_seconds=0)
    first = asyncio.create_task(engine.request(share, "a", "a1"))
    await until(lambda: engine.entered == ["a1"])
    waiting = asyncio.create_task(engine.request(share, "b", "b1"))
    await until(lambda: share.queued == 1)
    assert share.stalled() is None  # no room yet: waiting is not stuck
    assert share._poller is not None
    share._poller.cancel()
    await settle()
    engine.runtime.stats.running = 1  # room now, and no poller to see it
    await settle()
    assert engine.entered == ["a1"]
    reason = share.stalled()
    assert reason is not None and "1 request(s) waited" in reason and share.stalls == 1
    await until(lambda: engine.entered == ["a1", "b1"])
    assert share.stalled() is None and share.stalls == 1
    for event in engine.release.values():
        event.set()
    await asyncio.gather(first, waiting)
    assert share.running == 0 and share.queued == 0


async def test_requests_gone_from_the_line_are_neither_counted_nor_ahead():
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=1, lookahead=1)
    first = asyncio.create_task(engine.request(share, "a", "a1"))
    await until(lambda: engine.entered == ["a1"])
    leaving = [asyncio.create_task(engine.request(share, "b", f"b{i}")) for i in range(3)]
    await until(lambda: share.queued == 3)
    for task in leaving:
        task.cancel()
    await asyncio.gather(*leaving, return_exceptions=True)
    assert share.queued == 0 and share.ahead("c") == [] and share.held == {"a": 1}
    engine.release["a1"].set()
    await first
    assert share.running == 0 and not share._waiting


async def test_a_beam_search_is_one_request_of_the_engine_and_holds_no_one_back():
    """A beam search of 20 takes 20 places but is one request (one group) of the engine, which counts what it runs in
    requests: its 20 places read as 19 requests waiting in the engine, past the lookahead, and every later request
    waited behind it for as long as it ran."""
    engine = Engine()
    share = FairShare(engine.runtime, capacity=100, running=32, lookahead=16)
    beams = share.admit("a", 20)
    entered = asyncio.Event()

    async def beam_search() -> None:
        async with share.turn(beams, 20, [1, 2], requests=1):
            entered.set()
            await asyncio.Event().wait()

    running = asyncio.create_task(beam_search())
    await entered.wait()
    engine.runtime.stats.running = 1  # the engine runs the group
    later = asyncio.create_task(engine.request(share, "b", "b1"))
    await until(lambda: engine.entered == ["b1"])
    engine.release["b1"].set()
    await later
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert share.running == 0 and share.requests == 0
