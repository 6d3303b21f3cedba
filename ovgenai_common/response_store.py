"""Stored responses, for `previous_response_id` and `GET`/`DELETE /v1/responses/{id}`: each with its conversation so
far (as chat messages), kept in memory for a time and within a count and a byte budget. Each is held as its JSON
text, so the budget counts what is held (a response's many small strings took ~15 times their JSON size as Python
objects); it is read back when asked for. A client (ovgenai_common/clients.py) keeps at most three quarters of the
count and of the bytes; past the budget, the oldest response of the client holding the most goes first, so one
client's flood evicts its own responses, not others'. Ids are random (128 bits): a response is found only by whoever
was given its id."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from .errors import APIError, ErrorKind
from .sse import dumps

# The memory all stored conversations may take together (a conversation carries its images as data URLs).
STORE_BYTES = 64 * 1024 * 1024
# What one entry holds beside its JSON: its Stored, the id and client strings, its place in the two dicts.
ENTRY_OVERHEAD = 1024
CLIENT_SHARE = 0.75  # of the count and of the bytes: the last quarter is always others'


@dataclass(frozen=True)
class Stored:
    response_json: bytes
    conversation_json: bytes  # the chat messages up to and including this response, without instructions
    client: str
    size: int
    expires: float

    @property
    def response(self) -> dict[str, Any]:
        return msgspec.json.decode(self.response_json)

    @property
    def conversation(self) -> list[dict[str, Any]]:
        return msgspec.json.decode(self.conversation_json)


class ResponseStore:
    def __init__(self, size: int, ttl: float, max_bytes: int = STORE_BYTES,
                 clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl, self.max_bytes, self._clock = size, ttl, max_bytes, clock
        self._items: OrderedDict[str, Stored] = OrderedDict()  # oldest first
        self._bytes: dict[str, int] = {}  # by client
        self._counts: dict[str, int] = {}  # by client

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    @property
    def bytes(self) -> int:
        return sum(self._bytes.values())

    def put(self, client: str, response: dict[str, Any], conversation: list[dict[str, Any]]) -> bool:
        """Keep a finished response; False when it alone is larger than the whole budget (it is not kept)."""
        response_json, conversation_json = dumps(response), dumps(conversation)
        size = len(response_json) + len(conversation_json) + ENTRY_OVERHEAD
        if size > self.max_bytes or self.size == 0:
            return False
        self._expire()
        self._items[response["id"]] = Stored(response_json, conversation_json, client, size,
                                             self._clock() + self.ttl)
        self._bytes[client] = self._bytes.get(client, 0) + size
        self._counts[client] = self._counts.get(client, 0) + 1
        while (self._counts[client] > max(1, int(self.size * CLIENT_SHARE))
               or self._bytes[client] > self.max_bytes * CLIENT_SHARE):
            self._drop(self._oldest_of(client))  # past its share: its own oldest
        while len(self._items) > self.size or self.bytes > self.max_bytes:
            self._evict(by_count=len(self._items) > self.size)
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

    def _evict(self, by_count: bool) -> None:
        """The oldest response of the client holding the most (responses, or bytes)."""
        held = self._counts if by_count else self._bytes
        self._drop(self._oldest_of(max(held, key=held.__getitem__)))

    def _oldest_of(self, client: str) -> str:
        return next(rid for rid, stored in self._items.items() if stored.client == client)

    def _expire(self) -> None:
        now = self._clock()
        while self._items:
            rid, oldest = next(iter(self._items.items()))
            if oldest.expires > now:
                return
            self._drop(rid)

    def _drop(self, rid: str) -> None:
        stored = self._items.pop(rid)
        self._bytes[stored.client] -= stored.size
        self._counts[stored.client] -= 1
        if not self._counts[stored.client]:
            del self._bytes[stored.client], self._counts[stored.client]
