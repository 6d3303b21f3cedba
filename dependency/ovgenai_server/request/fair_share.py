"""One model's places, shared fairly between clients (an API key, or an address without one).

A place is one sequence a request asks the engine for. Admission counts each client's places: any client may hold
up to `capacity - reserve`, and only a client holding less than its share (`capacity / (clients + 1)`, room kept for
one more) takes one of the last `reserve`, so one client's backlog never fills the server for the others. Requests
then wait for the engine in turns, client by client: the engine is given only `lookahead` requests more than it is
running (its own queue is first come, first served), and each time one goes in, the next is taken from the next
client in line. A request that asks for more than `request_share` places at once (a completion's prompt list times
`n`) is served in turns of that many (api/completions.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from ..engine.contract.interface import Runtime

logger = logging.getLogger(__name__)

# How many requests the engine may hold waiting ahead of its running batch: enough for its next steps' prompts to be
# batched, few enough that the order it serves them in (first come) hardly matters.
LOOKAHEAD = 16
POLL_SECONDS = 0.01  # while requests wait: the engine's running count changes with its steps, not with our events
# Requests waiting while the engine has room are let in within a poll; this long without one is a fault: the
# watchdog says so (readiness fails with the reason, a metric counts it) and rebuilds the line from what is live.
STALL_SECONDS = 5.0


class Ticket:
    """The places a request was admitted with, held for its client until it ends: released once, by whoever knows
    it ended (the stream runner, a unary answer), or when the request is dropped without running."""

    def __init__(self, share: FairShare, client: str, places: int):
        self.share, self.client, self.places = share, client, places
        share.held[client] = share.held.get(client, 0) + places
        self._finalizer = weakref.finalize(self, share._release, client, places)

    def release(self) -> None:
        self._finalizer()  # runs once: later calls, and the collector's, do nothing


@dataclass(eq=False)  # one waiter is one turn: compared and hashed by identity
class _Waiter:
    places: int
    prompt: Sequence[int]
    requests: int  # the engine's requests it becomes: one for a group of beams, one per sampled choice
    ready: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def gone(self) -> bool:
        """Its request left while it waited (a client that disconnects cancels the wait at once; the request's own
        clean-up runs a turn of the loop later)."""
        return self.ready.cancelled()


class FairShare:
    def __init__(self, runtime: Runtime, capacity: int, running: int, lookahead: int = LOOKAHEAD,
                 stall_seconds: float = STALL_SECONDS):
        self.runtime = runtime
        self.capacity = capacity  # places held at most: running and waiting together
        self.reserve = capacity // 4  # the last places: only for clients holding less than their share
        self.request_share = max(1, running // 4)  # a request's places at once; more are served in turns
        self.max_running = running + lookahead
        self.lookahead = lookahead
        self.stall_seconds = stall_seconds
        self.held: dict[str, int] = {}  # places per client, waiting or in the engine
        self.running = 0  # places in the engine: the sum of `_entered`'s
        self.requests = 0  # the engine requests they are (the engine counts what it runs in requests)
        self.stalls = 0  # times the watchdog found the line stuck and rebuilt it
        self._entered: set[_Waiter] = set()
        self._waiting: OrderedDict[str, deque[_Waiter]] = OrderedDict()
        self._poller: asyncio.Task[None] | None = None
        self._stuck_since: float | None = None  # when waiting requests were first seen with room and not let in
        self._stall = ""  # why the line stalled, until a request enters again

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
        return sum(not waiter.gone for queue in self._waiting.values() for waiter in queue)

    def ahead(self, client: str) -> list[Sequence[int]]:
        """The waiting prompts served before `client`'s next request would be, its turn taken client by client."""
        turns = len(self._waiting.get(client, ())) + 1
        return [waiter.prompt for other, queue in self._waiting.items() if other != client
                for waiter in list(queue)[:turns] if not waiter.gone]

    def admit(self, client: str, places: int) -> Ticket:
        """The request's places held for its client (checked first with `refusal`)."""
        return Ticket(self, client, places)

    @contextlib.asynccontextmanager
    async def turn(self, ticket: Ticket, places: int, prompt: Sequence[int], requests: int = 1
                   ) -> AsyncIterator[None]:
        """Held while one of the ticket's requests runs in the engine (as `requests` engine requests): entered once its
        client's turn comes."""
        client = ticket.client
        waiter = _Waiter(places, prompt, requests)
        if not self._waiting and self._room(places):
            self._enter(waiter)
        else:
            self._waiting.setdefault(client, deque()).append(waiter)
            self._poll()
        try:
            await waiter.ready  # at once when it entered above
            yield
        finally:
            self._leave(client, waiter)
            self._dispatch()

    def stalled(self) -> str | None:
        """The watchdog: why admission is stuck (requests wait, the engine has room, none has been let in for
        `stall_seconds`), after rebuilding the line; None while it moves. Run by the poller and by readiness."""
        try:
            head = self._head()
            stuck = head is not None and self._room(head.places)
        except Exception:  # a line that cannot even be read is stuck too
            logger.exception("admission: the waiting line could not be read")
            stuck = True
        now = time.monotonic()
        if not stuck:
            self._stuck_since = None
            return None
        if self._stuck_since is None:
            self._stuck_since = now
        if now - self._stuck_since < self.stall_seconds:
            return self._stall or None
        self.stalls += 1
        reason = (f"admission stalled: {self.queued} request(s) waited {now - self._stuck_since:.0f} s while the "
                  "engine had room; the waiting line was rebuilt")
        logger.error("%s (stall %d)", reason, self.stalls)
        self._stall, self._stuck_since = reason, None
        self._rebuild()
        return reason

    def _release(self, client: str, places: int) -> None:
        self.held[client] -= places
        if not self.held[client]:
            del self.held[client]

    def _room(self, places: int) -> bool:
        """The engine waits on fewer than `lookahead` of the requests it was given (its running count is from its
        last step, in requests: a beam search's group is one; a request let in counts at once, before the engine has
        it), and its places stay within max_num_seqs and the lookahead."""
        waiting_in_engine = max(0, self.requests - self.runtime.stats.running)
        return waiting_in_engine < self.lookahead and self.running + places <= self.max_running

    def _head(self) -> _Waiter | None:
        """The next request to be let in: the first client's oldest that is still there."""
        for queue in self._waiting.values():
            for waiter in queue:
                if not waiter.gone:
                    return waiter
        return None

    def _enter(self, waiter: _Waiter) -> None:
        self.running += waiter.places
        self.requests += waiter.requests
        self._entered.add(waiter)
        self._stuck_since, self._stall = None, ""
        waiter.ready.set_result(None)

    def _leave(self, client: str, waiter: _Waiter) -> None:
        """The request's turn ends: out of the engine if it entered (its turn may have come as it left), else out of
        the line (unless a look already dropped it as gone)."""
        if waiter in self._entered:
            self._entered.remove(waiter)
            self.running -= waiter.places
            self.requests -= waiter.requests
            return
        queue = self._waiting.get(client)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[client]

    def _dispatch(self) -> None:
        """Requests into the engine while it has room, one client's at a time, in turn; requests that left while
        waiting are dropped from the line as they are met, never given a turn."""
        while self._waiting:
            client, queue = next(iter(self._waiting.items()))
            while queue and queue[0].gone:
                queue.popleft()
            if not queue:
                del self._waiting[client]
                continue
            if not self._room(queue[0].places):
                return
            waiter = queue.popleft()
            if queue:
                self._waiting.move_to_end(client)  # to the back of the line
            else:
                del self._waiting[client]
            self._enter(waiter)

    def _rebuild(self) -> None:
        """The line made again from the requests still waiting, in their order; the engine's places recounted from
        the turns in it; a new poller."""
        live = [(client, waiter) for client, queue in self._waiting.items() for waiter in queue if not waiter.gone]
        self._waiting = OrderedDict()
        for client, waiter in live:
            self._waiting.setdefault(client, deque()).append(waiter)
        self.running = sum(waiter.places for waiter in self._entered)
        self.requests = sum(waiter.requests for waiter in self._entered)
        if self._poller is not None and not self._poller.done():
            self._poller.cancel()
        self._poller = None
        self._dispatch()
        if self._waiting:
            self._poll()

    def _poll(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll_while_waiting())

    async def _poll_while_waiting(self) -> None:
        while self._waiting:
            await asyncio.sleep(POLL_SECONDS)
            try:
                self._dispatch()
            except Exception:  # never the poller's end: the watchdog below rebuilds the line
                logger.exception("admission: letting waiting requests in failed")
            if self._poller is not asyncio.current_task():
                return  # a rebuild started another
            self.stalled()
