"""What every route of the backend works with: the served models, the request limits, the metrics and the stored
responses."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ovgenai_common.response_store import ResponseStore

from .admission import Limits
from .engine.interface import Runtime
from .fair_share import FairShare
from .metrics import ServerMetrics
from .models import ModelRegistry, ServedModel


@dataclass
class ServerState:
    models: ModelRegistry
    limits: Limits
    metrics: ServerMetrics
    started_at: float = field(default_factory=time.time)
    shares: dict[Runtime, FairShare] = field(default_factory=dict)  # by engine: a reloaded model's is new
    responses: ResponseStore = field(default_factory=lambda: ResponseStore(0, 1.0))  # the Responses API's store

    def queued(self, name: str) -> int:
        """A model's requests waiting for their turn before its engine."""
        model = self.models.get(name)
        share = self.shares.get(model.runtime) if model is not None else None
        return share.queued if share is not None else 0

    def share_of(self, model: ServedModel) -> FairShare:
        """The model's places, shared between clients (fair_share.py)."""
        share = self.shares.get(model.runtime)
        if share is None:
            capacity = model.facts.max_num_seqs + self.limits.max_waiting_requests
            share = self.shares[model.runtime] = FairShare(model.runtime, capacity, model.facts.max_num_seqs)
        return share
