"""The last check before the engine: the model is up and has room for the request's sequences, and its first token
would come within the server's queue limit; a 429 with the seconds to wait otherwise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ovgenai_common.errors import MAX_RETRY_AFTER, APIError, ErrorKind, invalid

from ..models.registry import ServedModel
from ..settings import BackendSettings
from .fair_share import FairShare, Ticket


@dataclass(frozen=True)
class Limits:
    """The server-wide limits of a request, from the settings."""

    max_n: int
    max_waiting_requests: int
    max_queue_wait: float

    @classmethod
    def of(cls, settings: BackendSettings) -> Limits:
        return cls(settings.max_n, settings.max_waiting_requests, settings.max_queue_wait)


def admit(model: ServedModel, limits: Limits, share: FairShare, client: str, prompts: Sequence[Sequence[int]],
          copies: int = 1) -> Ticket:
    """429 when the client would take more than its share of the model's places (max_num_seqs + max_waiting_requests,
    request/fair_share.py), or when the prompts' first tokens would come later than max_queue_wait, with the seconds to
    wait; 503 while the model is not available; 400 for more places than the server holds. A request's places beyond its
    share of them at once (`share.request_share`) are served in turns, so they are not counted. The ticket holds the
    places."""
    runtime = model.runtime
    health = runtime.health()
    if not health.ready:
        raise APIError(ErrorKind.UNAVAILABLE, f"Model '{model.name}' is not available: {health.message}.")
    if copies > share.capacity:  # more than the server ever holds: retrying cannot help, so no 429
        param = "n" if len(prompts) == 1 else "prompt"
        raise invalid(f"This request asks for {copies} sequences (its prompts times 'n'); a request may ask for at "
                      f"most {share.capacity} (max_num_seqs + max_waiting_requests), served "
                      f"{share.request_share} at a time.", param)
    places = min(copies, share.request_share)
    refusal = share.refusal(client, places)
    if refusal is not None:
        raise APIError(ErrorKind.OVERLOADED, f"{refusal}; retry later.")
    limit = limits.max_queue_wait
    if limit and runtime.in_flight():  # an idle engine serves any prompt it accepts, however long
        _check_wait(runtime.queue_wait([*share.ahead(client), *prompts]), limit)
    return share.admit(client, places)


def _check_wait(wait: float | None, limit: float) -> None:
    if wait is not None and wait > limit:
        retry = min(math.ceil(wait - limit), MAX_RETRY_AFTER)
        raise APIError(
            ErrorKind.OVERLOADED,
            f"The server is at capacity: this request's first token would come in about {wait:.0f} s, past the "
            f"server's limit of {limit:g} s (max_queue_wait); retry in {retry} s.",
            retry_after=retry,
        )
