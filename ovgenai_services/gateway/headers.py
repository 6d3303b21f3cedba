"""Security headers on every gateway response: the chat page may run only its own script and style, from this
origin, inside no other site's frame; nothing is sniffed into another type; no Referer leaves the page.

Four fixed headers are a few lines of ASGI, less than a dependency would bring. FastAPI's /docs and /redoc pages load
Swagger UI and ReDoc from a CDN with an inline script: they keep every header but the content policy's sources
(they still may not be framed).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = ("default-src 'self'; base-uri 'none'; object-src 'none'; form-action 'self'; "
                           "frame-ancestors 'none'")
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
THIRD_PARTY_PAGES = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = "frame-ancestors 'none'" if scope["path"] in THIRD_PARTY_PAGES else CONTENT_SECURITY_POLICY

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in {**HEADERS, "Content-Security-Policy": policy}.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
