"""What every route of the backend works with: the served models, the request limits and the metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .admission import Limits
from .metrics import ServerMetrics
from .models import ModelRegistry


@dataclass
class ServerState:
    models: ModelRegistry
    limits: Limits
    metrics: ServerMetrics
    started_at: float = field(default_factory=time.time)
