"""What every route of the backend works with: the served models, the request limits, the metrics and the stored
responses."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ovgenai_common.response_store import ResponseStore

from .admission import Limits
from .fair_share import FairShare
from .metrics import ServerMetrics
from .models import ModelRegistry, ServedModel


@dataclass
class ServerState:
    models: ModelRegistry
    limits: Limits
    metrics: ServerMetrics
    started_at: float = field(default_factory=time.time)
    shares: dict[str, FairShare] = field(default_factory=dict)
    responses: ResponseStore = field(default_factory=lambda: ResponseStore(0, 1.0))  # the Responses API's store

    def queued(self, name: str) -> int:
        """A model's requests waiting for their turn before its engine."""
        share = self.shares.get(name)
        return share.queued if share is not None else 0

    def share_of(self, model: ServedModel) -> FairShare:
        """The model's places, shared between clients (fair_share.py)."""
        share = self.shares.get(model.name)
        if share is None or share.runtime is not model.runtime:
            capacity = model.facts.max_num_seqs + self.limits.max_waiting_requests
            share = self.shares[model.name] = FairShare(model.runtime, capacity, model.facts.max_num_seqs)
        return share
