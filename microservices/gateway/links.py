"""OPEA's `link_list`: pages and files fetched with httpx, within limits of size, time and redirects, and never
from an address that is not public unless LINK_ALLOWED_NETWORKS allows it (a server-side request forgery guard).

Each hop (the link, then every redirect) is resolved here, every address it resolves to is checked, and the request
goes to the checked address (with the host name kept for the Host header and TLS), so a name that resolves again
differently between the check and the connection (DNS rebinding) reaches nothing new. Connections are not reused
across hops, and proxies from the environment are not used: a proxy would resolve the name itself, unchecked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from ovgenai_common.errors import APIError, ErrorKind

from .documents import SUPPORTED
from .settings import GatewaySettings

PARAM = "link_list"
CONTENT_TYPES = {"text/html": "html", "application/xhtml+xml": "html", "application/pdf": "pdf",
                 "text/plain": "text", "text/markdown": "markdown", "text/x-markdown": "markdown"}
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_link_list(raw: str | None, limit: int) -> list[str]:
    """OPEA sends the links as one form field holding a JSON array of strings."""
    if raw is None or not raw.strip():
        return []
    try:
        links = json.loads(raw)
    except json.JSONDecodeError as error:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'link_list' must be a JSON array of URLs: {error}.",
                       PARAM) from error
    if not isinstance(links, list) or not all(isinstance(link, str) for link in links):
        raise APIError(ErrorKind.INVALID_REQUEST, "'link_list' must be a JSON array of URLs (strings).", PARAM)
    if len(links) > limit:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'link_list' names {len(links)} links; at most {limit} "
                                                  "are fetched per request (MAX_LINKS).", PARAM)
    for link in links:
        url = _url(link)
        if url.scheme not in ("http", "https") or not url.host:
            raise APIError(ErrorKind.INVALID_REQUEST, f"'{link[:200]}' is not an http or https URL.", PARAM)
    return links


def _url(link: str) -> httpx.URL:
    try:
        return httpx.URL(link)
    except httpx.InvalidURL as error:
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{link[:200]}' is not a valid URL: {error}.", PARAM) from error


def why_refused(address: Address) -> str | None:
    """Why an address may not be fetched by default, or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
    for kind in ("loopback", "link_local", "unspecified", "multicast", "reserved", "private"):
        if getattr(address, f"is_{kind}"):
            return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind.replace('_', '-')} address"
    if not address.is_global:
        return "not a public address"
    return None


def where(host: str, address: Address) -> str:
    return f"{address} is" if host.strip("[]") == str(address) else f"{host} resolves to {address},"


@dataclass
class Fetched:
    path: Path
    kind: str


class LinkFetcher:
    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.allowed = settings.link_allowed_networks

    def _check(self, link: str, host: str, address: Address) -> None:
        reason = why_refused(address)
        if reason and not any(address in network for network in self.allowed if network.version == address.version):
            raise APIError(
                ErrorKind.INVALID_REQUEST,
                f"Refused to fetch '{link}': {where(host, address)} {reason}. Links may not reach loopback, "
                "link-local, private or other non-public addresses unless LINK_ALLOWED_NETWORKS allows them.",
                PARAM,
            )

    async def _resolve(self, link: str, url: httpx.URL) -> str:
        """The checked address to connect to: every address the host resolves to must pass."""
        port = url.port or (443 if url.scheme == "https" else 80)
        host = url.raw_host.decode("ascii")  # IDNA-encoded, as DNS knows it
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise APIError(ErrorKind.INVALID_REQUEST, f"Could not resolve the host of '{link}': {error}.",
                           PARAM) from error
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
        for address in addresses:
            self._check(link, host, address)
        return str(addresses[0])

    async def fetch(self, link: str, folder: Path) -> Fetched:
        """The link's content spooled to a server-named file in `folder`, and how to read it."""
        try:
            async with asyncio.timeout(self.settings.link_timeout):
                return await self._fetch(link, folder)
        except TimeoutError as error:
            raise APIError(ErrorKind.INVALID_REQUEST,
                           f"Fetching '{link}' took longer than {self.settings.link_timeout:g} s (LINK_TIMEOUT).",
                           PARAM) from error
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise APIError(ErrorKind.INVALID_REQUEST, f"Could not fetch '{link}': {type(error).__name__}: {error}",
                           PARAM) from error

    async def _fetch(self, link: str, folder: Path) -> Fetched:
        url = _url(link)
        limits = httpx.Limits(max_keepalive_connections=0)  # a connection is never reused for another host
        async with httpx.AsyncClient(trust_env=False, follow_redirects=False, limits=limits,
                                     timeout=self.settings.link_timeout) as client:
            for _ in range(self.settings.link_max_redirects + 1):
                if url.scheme not in ("http", "https") or not url.host:
                    raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' redirects to '{url}', not an http or "
                                                              "https URL.", PARAM)
                address = await self._resolve(link, url)
                request = client.build_request(
                    "GET", url.copy_with(host=address),
                    headers={"Host": url.netloc.decode("ascii").rpartition("@")[2],
                             "Accept": "text/html, application/pdf, text/plain, text/markdown;q=0.9, */*;q=0.1"},
                    extensions={"sni_hostname": url.raw_host.decode("ascii")},
                )
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect:
                        url = url.join(response.headers["location"])
                        continue
                    return await self._save(link, url, response, folder)
                finally:
                    await response.aclose()
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' redirects more than {self.settings.link_max_redirects} "
                                                  "times (LINK_MAX_REDIRECTS).", PARAM)

    async def _save(self, link: str, url: httpx.URL, response: httpx.Response, folder: Path) -> Fetched:
        if response.status_code != 200:
            raise APIError(ErrorKind.INVALID_REQUEST, f"Fetching '{link}' answered {response.status_code}.", PARAM)
        kind = self._kind(link, url, response)
        limit = self.settings.link_max_bytes
        too_large = APIError(ErrorKind.PAYLOAD_TOO_LARGE, f"'{link}' is larger than {limit} bytes (LINK_MAX_BYTES).",
                             PARAM)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        body = bytearray()
        async for block in response.aiter_bytes():  # decompressed: the limit holds for what is stored
            body += block
            if len(body) > limit:
                raise too_large
        if not body:
            raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' is empty.", PARAM)
        if kind != "pdf":  # the loaders read UTF-8: re-encode what the page's charset says
            body = bytearray(bytes(body).decode(response.encoding or "utf-8", errors="replace").encode())
        suffix = {"html": ".html", "pdf": ".pdf", "markdown": ".md"}.get(kind, ".txt")

        def write() -> Path:
            with tempfile.NamedTemporaryFile(dir=folder, suffix=suffix, delete=False) as handle:
                handle.write(body)
            return Path(handle.name)

        return Fetched(await asyncio.to_thread(write), kind)

    @staticmethod
    def _kind(link: str, url: httpx.URL, response: httpx.Response) -> str:
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type in CONTENT_TYPES:
            return CONTENT_TYPES[content_type]
        by_suffix = SUPPORTED.get(Path(url.path).suffix.lower())
        if by_suffix and content_type in ("", "application/octet-stream", "binary/octet-stream"):
            return by_suffix
        raise APIError(
            ErrorKind.INVALID_REQUEST,
            f"'{link}' is {content_type or 'of no declared type'}; links may be HTML, PDF, plain text or Markdown.",
            PARAM,
        )
