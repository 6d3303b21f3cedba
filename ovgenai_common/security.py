"""Who may call a service: the API key on every route but the probes, and, without a key, the checks that keep
web pages from using a service on someone's machine (cross-site requests and DNS rebinding).

The rules, in the order they are applied to every HTTP request:

0. Pages on the origins ALLOWED_ORIGINS lists may call the service from a browser (CORS, off when empty): a
   preflight (OPTIONS) is answered before the rules below, since browsers send no key with one, and every answer to
   such a page carries the headers that let it read the answer, refusals included. The rules below still apply to
   the request itself (the key with one), except that, without a key, a listed origin counts as this service's own.
1. The probe paths (`/health`, `/live`, `/v1/health_check`, TorchServe's `/ping`, KServe's `/v2/health/*`) and the
   gateway's chat page are always open: orchestrators and browsers loading a page send no key.
2. With an API key, every other route needs `Authorization: Bearer <key>` (or `X-Api-Key: <key>`, as Anthropic's
   SDK sends it): the OpenAI, Anthropic and OVMS APIs, TEI's `/embed` and `/rerank`, `/metrics` (Prometheus sends
   the key as a bearer token), `/docs` and `/openapi.json`. A browser sends neither header on its own, so the key
   also stops cross-site requests.
3. Without a key, a request whose `Host` is a DNS name must name this service: a DNS-rebinding page reaches a
   service only under a name of the attacker's public domain. Accepted: IP addresses (a browser sends one only when
   its user typed it: nothing to rebind), names without a dot (`localhost`, compose and Kubernetes service names:
   public DNS has none), `*.localhost`, the name the service is bound to, and ALLOWED_HOSTS. Then a state-changing
   request (POST, PUT, PATCH, DELETE) that a browser marks with a cross-site `Origin` is refused; clients that send
   no `Origin` (curl, the SDKs, other services) are not browsers and pass.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from . import clients
from .errors import APIError, ErrorKind, error_response

logger = logging.getLogger(__name__)

# The probes: readiness, liveness, OPEA's health check and TorchServe's. Everything else needs the key when one is set.
PROBE_PATHS = frozenset({"/health", "/live", "/v1/health_check", "/ping", "/v2/health/live", "/v2/health/ready"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class OpenRoutes:
    """The paths that need no key: exact paths, and folders of static files (never with `..` in the path)."""

    def __init__(self, paths: Iterable[str] = PROBE_PATHS, prefixes: Iterable[str] = ()):
        self.paths = frozenset(paths)
        self.prefixes = tuple(prefixes)

    def __contains__(self, path: str) -> bool:
        if path in self.paths:
            return True
        return path.startswith(self.prefixes) and "/.." not in path if self.prefixes else False


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


async def _refuse(error: APIError, scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await error_response(error)(scope, receive, send)


class APIKeyMiddleware:
    """`Authorization: Bearer <key>`, or `X-Api-Key: <key>`, on every route but the open ones."""

    def __init__(self, app: ASGIApp, api_key: str, open_routes: OpenRoutes | None = None):
        self.app = app
        self.expected = f"Bearer {api_key}".encode()
        self.key = api_key.encode()
        self.digest = clients.key_digest(self.key)
        self.open_routes = open_routes or OpenRoutes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path", "") not in self.open_routes:
            bearer, key = _header(scope, b"authorization"), _header(scope, b"x-api-key")
            given, expected = (key, self.key) if bearer is None and key is not None else (bearer or b"", self.expected)
            if not hmac.compare_digest(given, expected):
                error = APIError(ErrorKind.UNAUTHORIZED, "Invalid or missing API key.", code="invalid_api_key")
                await _refuse(error, scope, receive, send)
                return
            scope.setdefault("state", {})[clients.KEY] = self.digest  # who it is (clients.py)
        await self.app(scope, receive, send)


def host_name(value: str) -> str:
    """The host of a `Host` header or URL authority, without port or brackets, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0].rstrip(".") if value.count(":") == 1 else value.rstrip(".")


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HostPatterns:
    """ALLOWED_HOSTS: exact names, `*.example.com` for its subdomains, `*` for any."""

    def __init__(self, patterns: Iterable[str]):
        self.patterns = [p.strip().lower().rstrip(".") for p in patterns if p.strip()]

    def match(self, host: str, *, wildcard: bool = True) -> bool:
        for pattern in self.patterns:
            if pattern == "*":
                if wildcard:
                    return True
            elif pattern.startswith("*.") and host.endswith(pattern[1:]):
                return True
            elif host == pattern:
                return True
        return False


def cors_options(origins: Iterable[str]) -> dict[str, Any]:
    """Starlette's CORSMiddleware for ALLOWED_ORIGINS: their pages may send any method and header (the key
    included) and read the request id and Retry-After; no cookies (credentials) are involved, as the key travels in
    a header the page sets itself. A listed page on a public address may call a service on a private one (Chrome's
    Private Network Access)."""
    return {"allow_origins": list(origins), "allow_methods": ["*"], "allow_headers": ["*"],
            "expose_headers": ["X-Request-ID", "Retry-After"], "allow_private_network": True, "max_age": 600}


class LocalAccessMiddleware:
    """Without an API key: `Host` must name this service, and browsers' cross-site writes are refused unless they
    come from an origin ALLOWED_ORIGINS lists."""

    def __init__(self, app: ASGIApp, bound_host: str, allowed_hosts: Iterable[str] = (),
                 open_routes: OpenRoutes | None = None, allowed_origins: Iterable[str] = ()):
        self.app = app
        names = list(allowed_hosts)
        if bound_host and not is_ip(host_name(bound_host)):
            names.append(host_name(bound_host))
        self.allowed = HostPatterns(names)
        self.open_routes = open_routes or OpenRoutes()
        self.origins = frozenset(allowed_origins)

    def host_allowed(self, host: str) -> bool:
        return is_ip(host) or "." not in host or is_loopback(host) or self.allowed.match(host)

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Same site: the page's host is the one asked, both are this machine, or a name the settings trust."""
        if origin.lower().rstrip("/") in self.origins:  # a page the settings let call this service (CORS)
            return True
        parts = urlsplit(origin)
        if not parts.scheme or not parts.hostname:  # `null`: sandboxed frames, file pages, some redirects
            return False
        page = parts.hostname.rstrip(".")
        return page == host or (is_loopback(page) and is_loopback(host)) or self.allowed.match(page, wildcard=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path", "") in self.open_routes:
            await self.app(scope, receive, send)
            return
        raw_host = _header(scope, b"host")
        host = host_name(raw_host.decode("latin-1")) if raw_host else ""
        if host and not self.host_allowed(host):
            logger.warning("refused a request for host %r (not in ALLOWED_HOSTS)", host[:100])
            error = APIError(ErrorKind.FORBIDDEN, f"Host '{host[:100]}' is not served here: add it to ALLOWED_HOSTS, "
                                                  "or set an API key.", code="host_not_allowed")
            await _refuse(error, scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is not None and (scope["type"] == "websocket" or scope.get("method") in STATE_CHANGING):
            text = origin.decode("latin-1")
            if not self.origin_allowed(text, host):
                logger.warning("refused a cross-site %s from origin %r", scope.get("method", "connection"), text[:100])
                error = APIError(ErrorKind.FORBIDDEN, "Cross-site requests are refused: this service has no API "
                                                      "key, so only its own pages may send it requests.",
                                 code="cross_site_request")
                await _refuse(error, scope, receive, send)
                return
        await self.app(scope, receive, send)


def exposure_warning(host: str, api_key: str | None) -> str | None:
    """What to tell the operator of a service reachable from other machines without a key."""
    if api_key or is_loopback(host):
        return None
    return (f"listening on {host} without an API key: anyone who can reach this address can use the service. "
            "Set API_KEY (or SERVICE_API_KEY), or HOST=127.0.0.1 to serve this machine only.")
