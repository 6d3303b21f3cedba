"""One model's places, shared fairly between clients (an API key, or an address without one).

A place is one sequence a request asks the engine for. Admission counts each client's places: any client may hold
up to `capacity - reserve`, and only a client holding less than its share (`capacity / (clients + 1)`, room kept for
one more) takes one of the last `reserve`, so one client's backlog never fills the server for the others. Requests
then wait for the engine in turns, client by client: the engine is given only `lookahead` requests more than it is
running (its own queue is first come, first served), and each time one goes in, the next is taken from the next
client in line. A request that asks for more than `request_share` places at once (a completion's prompt list times
`n`) is served in turns of that many (completions.py)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from .engine.interface import Runtime

# How many requests the engine may hold waiting ahead of its running batch: enough for its next steps' prompts to be
# batched, few enough that the order it serves them in (first come) hardly matters.
LOOKAHEAD = 16
POLL_SECONDS = 0.01  # while requests wait: the engine's running count changes with its steps, not with our events


class Ticket:
    """The places a request was admitted with, held for its client until it ends: released once, by whoever knows
    it ended (the stream runner, a unary answer), or when the request is dropped without running."""

    def __init__(self, share: FairShare, client: str, places: int):
        self.share, self.client, self.places = share, client, places
        share.held[client] = share.held.get(client, 0) + places
        self._finalizer = weakref.finalize(self, share._release, client, places)

    def release(self) -> None:
        self._finalizer()  # runs once: later calls, and the collector's, do nothing


@dataclass
class _Waiter:
    places: int
    prompt: Sequence[int]
    ready: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class FairShare:
    def __init__(self, runtime: Runtime, capacity: int, running: int, lookahead: int = LOOKAHEAD):
        self.runtime = runtime
        self.capacity = capacity  # places held at most: running and waiting together
        self.reserve = capacity // 4  # the last places: only for clients holding less than their share
        self.request_share = max(1, running // 4)  # a request's places at once; more are served in turns
        self.max_running = running + lookahead
        self.lookahead = lookahead
        self.held: dict[str, int] = {}  # places per client, waiting or in the engine
        self.running = 0  # places in the engine
        self._waiting: OrderedDict[str, deque[_Waiter]] = OrderedDict()
        self._poller: asyncio.Task[None] | None = None

    def refusal(self, client: str, places: int) -> str | None:
        """Why a request for `places` more from `client` cannot be admitted now; None when it can."""
        total, mine = sum(self.held.values()), self.held.get(client, 0)
        if total + places > self.capacity:
            return f"The server is at capacity ({self.capacity} sequences in flight)"
        share = self.capacity // (len(self.held) + (client not in self.held) + 1)
        if total + places > self.capacity - self.reserve and mine + places > share:
            return (f"This client holds {mine} of the server's {self.capacity} places, more than its share while "
                    "others wait")
        return None

    @property
    def queued(self) -> int:
        """Requests waiting here for their turn (not yet in the engine)."""
        return sum(len(queue) for queue in self._waiting.values())

    def ahead(self, client: str) -> list[Sequence[int]]:
        """The waiting prompts served before `client`'s next request would be, its turn taken client by client."""
        turns = len(self._waiting.get(client, ())) + 1
        return [waiter.prompt for other, queue in self._waiting.items() if other != client
                for waiter in list(queue)[:turns]]

    def admit(self, client: str, places: int) -> Ticket:
        """The request's places held for its client (checked first with `refusal`)."""
        return Ticket(self, client, places)

    @contextlib.asynccontextmanager
    async def turn(self, ticket: Ticket, places: int, prompt: Sequence[int]) -> AsyncIterator[None]:
        """Held while one of the ticket's requests runs in the engine: entered once its client's turn comes."""
        client = ticket.client
        waiter: _Waiter | None = None
        entered = False
        try:
            if not self._waiting and self._room(places):
                self.running += places
            else:
                waiter = _Waiter(places, prompt)
                self._waiting.setdefault(client, deque()).append(waiter)
                self._poll()
                await waiter.ready
            entered = True
            yield
        finally:
            if entered:
                self.running -= places
            elif waiter is not None:  # left while waiting
                self._forget(client, waiter)
            self._dispatch()

    def _release(self, client: str, places: int) -> None:
        self.held[client] -= places
        if not self.held[client]:
            del self.held[client]

    def _room(self, places: int) -> bool:
        """The engine waits on fewer than `lookahead` of what it was given (its running count is from its last step;
        a request let in counts at once, before the engine has it)."""
        waiting_in_engine = max(0, self.running - self.runtime.stats.running)
        return waiting_in_engine < self.lookahead and self.running + places <= self.max_running

    def _dispatch(self) -> None:
        """Requests into the engine while it has room, one client's at a time, in turn."""
        while self._waiting:
            client, queue = next(iter(self._waiting.items()))
            if not self._room(queue[0].places):
                return
            waiter = queue.popleft()
            self.running += waiter.places
            waiter.ready.set_result(None)
            del self._waiting[client]
            if queue:
                self._waiting[client] = queue  # to the back of the line

    def _forget(self, client: str, waiter: _Waiter) -> None:
        queue = self._waiting.get(client)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[client]
        else:  # its turn came as it left: it was counted in
            self.running -= waiter.places

    def _poll(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll_while_waiting())

    async def _poll_while_waiting(self) -> None:
        while self._waiting:
            await asyncio.sleep(POLL_SECONDS)
            self._dispatch()
