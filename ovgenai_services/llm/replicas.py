"""Which backend replica serves a request, when the LLM microservice is given several (replicas of one model).

Each backend caches the KV blocks of the prompts it has seen (prefix caching): a request whose prompt begins like
an earlier one's computes only what follows the shared part. Spread over replicas at random, requests that share a
long system or RAG prompt each meet a replica that has not seen it, and each replica computes it again. So the
default policy is prefix-aware, as vLLM's production-stack router is:

- the key is the prompt's beginning (the first `route_prefix_chars` characters of the messages' roles and text, or
  of the completion prompt): requests that share at least that much share a key;
- rendezvous (highest-random-weight) hashing orders the replicas for a key, the same order every time, and when a
  replica joins or leaves, only the keys it wins or held move;
- load is bounded (consistent hashing with bounded loads, Mirrokni et al.): a replica already serving more than
  (1 + route_load_factor) times the mean number of requests in flight is passed over for the next in the key's
  order, so one hot prefix cannot pile every request onto one replica;
- a replica that could not be reached, or answered 503, is tried last until its health check passes again;
- a request goes on to the next replica only when nothing ran where it failed (no connection, a 429: the rule is
  ovgenai_common/upstream.py's `NotRun`); any other failure is the client's answer, so that a request that made one
  backend fail cannot take the others down in turn.

`round_robin` spreads requests evenly instead (for comparison, or for backends without prefix caching).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol

RoutingPolicy = Literal["prefix", "round_robin"]


class Routable(Protocol):
    in_flight: int  # requests it serves now
    down: bool  # failed a request or a health check, and has not passed a health check since


def _text(content: Any) -> str:
    """A message's text, whether a string or OpenAI's list of parts (non-text parts are left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict)
                       and isinstance(part.get("text"), str))
    return ""


def prompt_prefix(body: Any, chars: int) -> str:
    """The first `chars` characters of what the model reads first: chat messages (role and text) or the prompt."""
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages")
    if isinstance(messages, list):
        text = "".join(f"{m.get('role', '')}\n{_text(m.get('content'))}\n" for m in messages if isinstance(m, dict))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a batch of prompts goes where its first one's prefix is
        text = prompt if isinstance(prompt, str) else ",".join(map(str, prompt)) if isinstance(prompt, list) else ""
    return text[:chars]


def rendezvous_order(key: str, count: int) -> list[int]:
    """Replica indexes, best first, for `key`: each replica's score is a hash of the key and its index."""
    def score(index: int) -> bytes:
        return hashlib.blake2b(f"{index}\0{key}".encode(), digest_size=8).digest()

    return sorted(range(count), key=score, reverse=True)


class Balancer:
    def __init__(self, count: int, policy: RoutingPolicy = "prefix", prefix_chars: int = 256,
                 load_factor: float = 0.25):
        self.count, self.policy, self.prefix_chars, self.load_factor = count, policy, prefix_chars, load_factor
        self._turn = itertools.count()

    def order(self, body: Any, replicas: Sequence[Routable]) -> list[int]:
        """Every replica's index, in the order to try them for this request."""
        if self.policy == "round_robin":
            start = next(self._turn) % self.count
            ranked = [(start + step) % self.count for step in range(self.count)]
        else:
            ranked = rendezvous_order(prompt_prefix(body, self.prefix_chars), self.count)
            total = sum(replica.in_flight for replica in replicas)
            bound = math.ceil((1 + self.load_factor) * (total + 1) / self.count)
            ranked.sort(key=lambda index: replicas[index].in_flight >= bound)  # stable: the key's order within
        ranked.sort(key=lambda index: replicas[index].down)
        return ranked
