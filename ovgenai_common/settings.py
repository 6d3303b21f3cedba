"""Settings shared by every service; each service subclasses `ServiceSettings` once."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _json_object(value: Any) -> Any:
    """JSON text from the environment or the command line; an empty string (compose's unset variable) is {}."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else {}
    return value


PRECISION_HELP = (
    "CPU inference precision: auto (f32 on CPUs without AMX, OpenVINO's bf16 on CPUs with it), f32, bf16 or f16."
)

# KV-cache precisions OpenVINO takes; the backend's setting and the export tool's graph.pbtxt option share them.
KVCachePrecision = Literal["u8", "u4", "f16", "bf16", "f32"]

# A setting given as one JSON object, such as OpenVINO properties.
JsonObject = Annotated[dict[str, Any], NoDecode, BeforeValidator(_json_object)]


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=None, extra="ignore", populate_by_name=True, case_sensitive=False
    )

    host: str = Field("0.0.0.0", description="Address to listen on.")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on.")
    api_key: str | None = Field(
        None,
        validation_alias=AliasChoices("api_key", "SERVICE_API_KEY"),
        description="When set, /v1 and /v3 require 'Authorization: Bearer <key>'; health and metrics stay open.",
    )
    log_level: str = Field("info", description="Logging level (debug, info, warning, error).")
    max_request_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Largest request body accepted; larger bodies get 413."
    )
    graceful_shutdown_seconds: float = Field(
        30.0, ge=0, description="On SIGTERM, how long running requests may take to finish before exit."
    )
