"""Stored responses, for `previous_response_id` and `GET`/`DELETE /v1/responses/{id}`: each with its conversation so
far (as chat messages), kept in memory for a time and within a count and a byte budget. Past the budget, the oldest
response of the client holding the most bytes goes first, so one client's flood evicts its own responses, not
others'. Ids are random (128 bits): a response is found only by whoever was given its id."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import APIError, ErrorKind
from .sse import dumps

# The memory all stored conversations may take together (a conversation carries its images as data URLs).
STORE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Stored:
    response: dict[str, Any]
    conversation: list[dict[str, Any]]  # the chat messages up to and including this response, without instructions
    client: str
    size: int
    expires: float


class ResponseStore:
    def __init__(self, size: int, ttl: float, max_bytes: int = STORE_BYTES,
                 clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl, self.max_bytes, self._clock = size, ttl, max_bytes, clock
        self._items: OrderedDict[str, Stored] = OrderedDict()  # oldest first
        self._bytes: dict[str, int] = {}  # by client

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    @property
    def bytes(self) -> int:
        return sum(self._bytes.values())

    def put(self, client: str, response: dict[str, Any], conversation: list[dict[str, Any]]) -> bool:
        """Keep a finished response; False when it alone is larger than the whole budget (it is not kept)."""
        size = len(dumps(response)) + len(dumps(conversation))
        if size > self.max_bytes or self.size == 0:
            return False
        self._expire()
        self._items[response["id"]] = Stored(response, conversation, client, size, self._clock() + self.ttl)
        self._bytes[client] = self._bytes.get(client, 0) + size
        while len(self._items) > self.size or self.bytes > self.max_bytes:
            self._evict()
        return True

    def get(self, rid: str) -> Stored | None:
        self._expire()
        return self._items.get(rid)

    def history(self, previous_response_id: str | None) -> list[dict[str, Any]]:
        """The conversation a request's `previous_response_id` names ([] for none; its instructions are not carried
        over, as in OpenAI's API); a 404 on that field when it is not kept."""
        if previous_response_id is None:
            return []
        stored = self.get(previous_response_id)
        if stored is None:
            raise APIError(ErrorKind.NOT_FOUND, f"Previous response with id '{previous_response_id}' not found "
                           "(responses are kept for a time and within a count: RESPONSES_STORE_TTL, "
                           "RESPONSES_STORE_SIZE).", "previous_response_id")
        return stored.conversation

    def response(self, rid: str) -> dict[str, Any]:
        """`GET /v1/responses/{rid}`: the stored response, or a 404 when it is not kept."""
        stored = self.get(rid)
        if stored is None:
            raise APIError(ErrorKind.NOT_FOUND, f"Response with id '{rid}' not found.", "response_id")
        return stored.response

    def deleted(self, rid: str) -> dict[str, Any]:
        """`DELETE /v1/responses/{rid}`: drops it and says so, or `response`'s 404 when it is not kept."""
        self.response(rid)
        self.delete(rid)
        return {"id": rid, "object": "response", "deleted": True}

    def delete(self, rid: str) -> bool:
        stored = self.get(rid)
        if stored is None:
            return False
        self._drop(rid)
        return True

    def _evict(self) -> None:
        heaviest = max(self._bytes, key=self._bytes.__getitem__)
        self._drop(next(rid for rid, stored in self._items.items() if stored.client == heaviest))

    def _expire(self) -> None:
        now = self._clock()
        while self._items:
            rid, oldest = next(iter(self._items.items()))
            if oldest.expires > now:
                return
            self._drop(rid)

    def _drop(self, rid: str) -> None:
        stored = self._items.pop(rid)
        left = self._bytes[stored.client] - stored.size
        if left:
            self._bytes[stored.client] = left
        else:
            del self._bytes[stored.client]
