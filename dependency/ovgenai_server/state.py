"""What every route of the backend works with: the served models, the request limits, the metrics and the stored
responses."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import TypeVar

from ovgenai_common.response_store import ResponseStore

from .api.protocol import SamplingRequest
from .engine.contract.interface import Runtime
from .metrics import ServerMetrics
from .models.registry import ModelRegistry, ServedModel
from .request.admission import Limits
from .request.fair_share import FairShare

R = TypeVar("R", bound=SamplingRequest)


@dataclass
class ServerState:
    models: ModelRegistry
    limits: Limits
    metrics: ServerMetrics
    started_at: float = field(default_factory=time.time)
    shares: dict[Runtime, FairShare] = field(default_factory=dict)  # by engine: a reloaded model's is new
    responses: ResponseStore = field(default_factory=lambda: ResponseStore(0, 1.0))  # the Responses API's store
    seed: int | None = None  # vLLM's --seed: the seeds of requests that set none are drawn from it, in order
    _seeds: random.Random | None = field(default=None, init=False, repr=False)

    def seeded(self, request: R) -> R:
        """The request with a seed of the server's, when it sets none and the server was given one."""
        if self.seed is None or request.seed is not None:
            return request
        if self._seeds is None:
            self._seeds = random.Random(self.seed)
        return request.model_copy(update={"seed": self._seeds.getrandbits(63)})

    def queued(self, name: str) -> int:
        """A model's requests waiting for their turn before its engine."""
        share = self._share_named(name)
        return share.queued if share is not None else 0

    def stalls(self, name: str) -> int:
        """How often a model's waiting line was found stuck and rebuilt (request/fair_share.py's watchdog)."""
        share = self._share_named(name)
        return share.stalls if share is not None else 0

    def admission_stalled(self, model: ServedModel) -> str | None:
        """Why the model's admission is stuck, after the watchdog rebuilt it; None while it moves."""
        share = self.shares.get(model.runtime)
        return share.stalled() if share is not None else None

    def _share_named(self, name: str) -> FairShare | None:
        model = self.models.get(name)
        return self.shares.get(model.runtime) if model is not None else None

    def share_of(self, model: ServedModel) -> FairShare:
        """The model's places, shared between clients (request/fair_share.py)."""
        share = self.shares.get(model.runtime)
        if share is None:
            capacity = model.facts.max_num_seqs + self.limits.max_waiting_requests
            share = self.shares[model.runtime] = FairShare(model.runtime, capacity, model.facts.max_num_seqs)
        return share
