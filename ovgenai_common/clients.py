"""Who is asking: a client as the services share what they hold between clients (the backend's places, the stored
responses). With an API key, a client is the key it was let in with (kept as a digest, never in the clear); without
one, its address: the connection's peer, or what X-Forwarded-For says only when the peer is a proxy the operator
listed (FORWARDED_ALLOW_IPS, uvicorn's own setting; app.run_app). Nothing else a request says makes it another client:
an Authorization header is no identity where no key is checked."""

from __future__ import annotations

import hashlib

from fastapi import Request

KEY = "client_key"  # where the API key check leaves the digest of the key a request was let in with (scope state)


def key_digest(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def client_id(checked_key: str | None, address: str) -> str:
    """A client: the digest of the key it was let in with, or its address when the service checks no key."""
    return "key:" + checked_key if checked_key else "address:" + address


def client_of(request: Request) -> str:
    """The client an HTTP request comes from."""
    return client_id(request.scope.get("state", {}).get(KEY), request.client.host if request.client else "")
