"""What the routes depend on: the objects the app owns (its lifespan makes them), typed for `Depends`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .metrics import ProxyMetrics
from .service import Backend
from .settings import LLMSettings


def get_settings(request: Request) -> LLMSettings:
    return request.app.state.settings


def get_backend(request: Request) -> Backend:
    return request.app.state.backend


def get_metrics(request: Request) -> ProxyMetrics:
    return request.app.state.metrics


SettingsDep = Annotated[LLMSettings, Depends(get_settings)]
BackendDep = Annotated[Backend, Depends(get_backend)]
MetricsDep = Annotated[ProxyMetrics, Depends(get_metrics)]
