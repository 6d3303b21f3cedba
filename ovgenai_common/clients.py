"""Who is asking: a client as the services share what they hold between clients (the backend's places, the stored
responses), by its API key or, without one, its address."""

from __future__ import annotations

import hashlib

from fastapi import Request


def client_id(authorization: str, address: str) -> str:
    """A client: its API key (the Authorization it sends, kept as a digest, never in the clear), or its address
    without one."""
    if authorization:
        return "key:" + hashlib.sha256(authorization.encode()).hexdigest()[:16]
    return "address:" + address


def client_of(request: Request) -> str:
    """The client an HTTP request comes from (its key as OpenAI's SDKs send it, or as Anthropic's)."""
    key = request.headers.get("x-api-key")
    authorization = request.headers.get("authorization") or (f"Bearer {key}" if key else "")
    return client_id(authorization, request.client.host if request.client else "")
