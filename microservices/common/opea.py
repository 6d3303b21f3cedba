"""OPEA's microservice health-check body, kept byte-compatible with what OPEA clients expect."""

from __future__ import annotations

from typing import Any

VERSION = "1.0"


def health_check_body(service: str, **extra: Any) -> dict[str, Any]:
    return {
        "Service Title": f"opea_service@{service}/MicroService",
        "Service Description": "OPEA Microservice Infrastructure",
        "Version": VERSION,
        **extra,
    }
