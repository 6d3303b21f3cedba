"""Prefix-aware admission: requests that share a long prompt prefix wait for the first of them to fill the cache.

The pipeline looks a new request's prompt up in the prefix cache when the request is added, and blocks enter the
cache only once computed. So when 32 chats that share a 1,000-token system prompt (or a RAG template) arrive
together, all 32 miss and each computes the shared prefix again: 32 times the prefill work, and the last one
waits for all of it. The gate adds the first of them (the leader) at once and holds the others until the leader's
prompt has been computed (its first token, or its end); they then find the prefix cached and compute only their
own suffix (what it gains on `bench/peers.py`'s shared-system-prompt workload: bench/results.md).

Requests are compared on their first `min_shared` prompt tokens: shorter prompts, and prompts that share less,
are never held. A held request whose leader is aborted or fails is re-admitted (one of them becomes the leader).
"""

from __future__ import annotations

from collections import OrderedDict

from ..contract.messages import AddRequest

MIN_SHARED_TOKENS = 256  # a prefix worth waiting for: several KV blocks, whose prefill each held request saves
CACHED_HEADS = 256  # prefixes remembered as computed (the pipeline may have evicted some since; then they miss)


class PrefixGate:
    def __init__(self, min_shared: int = MIN_SHARED_TOKENS):
        self.min_shared = min_shared
        self._leaders: dict[int, tuple[int, ...]] = {}  # request id -> head, while its prompt is being computed
        self._leading: dict[tuple[int, ...], int] = {}  # head -> leader's request id
        self._cached: OrderedDict[tuple[int, ...], None] = OrderedDict()
        self._held: list[tuple[tuple[int, ...], AddRequest]] = []  # (head, request), in arrival order
        self.waits = 0  # requests held so far

    @property
    def held(self) -> int:
        return len(self._held)

    def admit(self, command: AddRequest) -> bool:
        """True: add the request to the pipeline now. False: it is held until its leader's prompt is computed."""
        if len(command.prompt.token_ids) < self.min_shared or command.params.num_beams > 1:
            return True  # too short to be worth waiting for; beams show no token until they end
        head = tuple(command.prompt.token_ids[: self.min_shared])
        if head in self._leading:
            self._held.append((head, command))
            self.waits += 1
            return False
        if head in self._cached:
            self._cached.move_to_end(head)
        else:
            self._leaders[command.request_id] = head
            self._leading[head] = command.request_id
        return True

    def prompt_done(self, request_id: int, computed: bool) -> list[AddRequest]:
        """A request produced its first token or ended; `computed` says whether its prompt went through the model
        (then its prefix is in the cache). Returns the held requests to add now, in arrival order."""
        head = self._leaders.pop(request_id, None)
        if head is None:
            return []
        del self._leading[head]
        if computed:
            self._cached[head] = None
            self._cached.move_to_end(head)
            while len(self._cached) > CACHED_HEADS:
                self._cached.popitem(last=False)
        waiting = [command for held_head, command in self._held if held_head == head]
        self._held = [(held_head, command) for held_head, command in self._held if held_head != head]
        return [command for command in waiting if self.admit(command)]

    def drop(self, request_id: int) -> bool:
        """An aborted request that was still held: forget it. False if it was not held."""
        kept = [(head, command) for head, command in self._held if command.request_id != request_id]
        dropped = len(kept) != len(self._held)
        self._held = kept
        return dropped

    def is_leader(self, request_id: int) -> bool:
        return request_id in self._leaders
