"""OPEA's microservice health-check body, kept byte-compatible with what OPEA clients expect."""

from __future__ import annotations

from typing import Any

VERSION = "1.0"


def health_check_body(service: str, *, version: bool = True, **extra: Any) -> dict[str, Any]:
    """OPEA's body, in OPEA's key order. `version=False` gives the exact body of OPEA's guide for the LLM
    microservice (no Version key), which OPEA clients and scripts compare verbatim."""
    body: dict[str, Any] = {"Service Title": f"opea_service@{service}/MicroService"}
    if version:
        body["Version"] = VERSION
    body["Service Description"] = "OPEA Microservice Infrastructure"
    return {**body, **extra}
