"""OPEA's `link_list`: pages and files fetched with httpx, within limits of size, time and redirects, and never
from an address that is not public unless LINK_ALLOWED_NETWORKS allows it (a server-side request forgery guard).

Each hop (the link, then every redirect) is resolved here, every address it resolves to is checked, and the request
goes to the checked address (with the host name kept for the Host header and TLS), so a name that resolves again
differently between the check and the connection (DNS rebinding) reaches nothing new. Connections are not reused
across hops, and proxies from the environment are not used: a proxy would resolve the name itself, unchecked.

An address is judged by its properties (`ipaddress`), not by a list of the ranges someone once tried: anything not
globally reachable is refused, together with the special-purpose ranges that older Pythons still call global, and an
IPv6 address that carries an IPv4 one (IPv4-mapped, NAT64) is judged by the IPv4 address it reaches. A refusal says
what was wrong, never what an internal name resolves to. Bodies are asked for uncompressed and, when a server
compresses them anyway, decoded with a ceiling on the output (decoding.py), so no encoding expands past
LINK_MAX_BYTES.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import httpx

from ovgenai_common.errors import APIError, ErrorKind

from ..settings import Network
from .decoding import ACCEPT_ENCODING, BoundedDecoder, TooLarge, UnsupportedEncoding
from .files import BINARY, SUPPORTED, content_kind, suffix_of

PARAM = "link_list"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
ACCEPT = ("text/html, application/pdf, application/vnd.openxmlformats-officedocument.wordprocessingml.document, "
          "application/vnd.openxmlformats-officedocument.presentationml.presentation, "
          "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet, text/csv, application/json, "
          "text/plain, text/markdown;q=0.9, */*;q=0.1")


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


# Special-purpose ranges (IANA's registries) that are not globally reachable, or reach other addresses on the
# client's behalf, but that some Python versions' `is_global` still accepts.
SPECIAL_PURPOSE = {
    ipaddress.ip_network("192.0.0.0/24"): "an IETF protocol assignment",
    ipaddress.ip_network("192.88.99.0/24"): "a 6to4 relay anycast address",
    ipaddress.ip_network("2002::/16"): "a 6to4 address (it reaches the IPv4 address inside it)",
    ipaddress.ip_network("2001::/32"): "a Teredo address (it reaches the IPv4 address inside it)",
    ipaddress.ip_network("64:ff9b:1::/48"): "a local-use NAT64 address",
    ipaddress.ip_network("3fff::/20"): "a documentation address",
    ipaddress.ip_network("5f00::/16"): "a segment-routing address",
}
# The well-known NAT64 prefix (RFC 6052): a translator connects to the IPv4 address in the last 32 bits, so that
# address decides (an IPv6-only network with DNS64 reaches every public site this way).
NAT64 = ipaddress.ip_network("64:ff9b::/96")
PROPERTIES = ("loopback", "link_local", "site_local", "unspecified", "multicast", "private", "reserved")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a connection to this IPv6 address reaches: IPv4-mapped (the kernel connects over IPv4) or
    the well-known NAT64 prefix (a translator does)."""
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def why_refused(address: Address) -> str | None:
    """Why an address may not be fetched by default, or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and (inner := embedded_ipv4(address)) is not None:
        return why_refused(inner)
    for network, reason in SPECIAL_PURPOSE.items():
        if address in network:
            return reason
    for kind in PROPERTIES:
        if getattr(address, f"is_{kind}", False):
            return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind.replace('_', '-')} address"
    if not address.is_global:
        return "not a public address"
    return None


@dataclass
class Fetched:
    path: Path
    kind: str


@dataclass(frozen=True)
class LinkLimits:
    """LINK_MAX_BYTES, LINK_TIMEOUT, LINK_MAX_REDIRECTS and LINK_ALLOWED_NETWORKS."""

    max_bytes: int
    timeout: float
    max_redirects: int
    allowed_networks: tuple[Network, ...] = ()


class LinkFetcher:
    def __init__(self, limits: LinkLimits):
        self.limits = limits
        self.allowed = limits.allowed_networks

    def _allowed(self, address: Address) -> bool:
        return any(address in network for network in self.allowed if network.version == address.version)

    def _check(self, link: str, host: str, address: Address) -> None:
        reason = why_refused(address)
        if reason is None or self._allowed(address):
            return
        # A literal address is the client's own text; what a name resolves to is not: say only that it is refused.
        literal = host.strip("[]") == str(address)
        what = f"{address} is {reason}" if literal else f"{host} resolves to a non-public address"
        raise APIError(
            ErrorKind.INVALID_REQUEST,
            f"Refused to fetch '{link}': {what}. Links may not reach loopback, link-local, private or other "
            "non-public addresses unless LINK_ALLOWED_NETWORKS allows them.",
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
            async with asyncio.timeout(self.limits.timeout):
                return await self._fetch(link, folder)
        except TimeoutError as error:
            raise APIError(ErrorKind.INVALID_REQUEST,
                           f"Fetching '{link}' took longer than {self.limits.timeout:g} s (LINK_TIMEOUT).",
                           PARAM) from error
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            # The error's text may name the address connected to (what the host resolved to): give its kind only.
            raise APIError(ErrorKind.INVALID_REQUEST, f"Could not fetch '{link}': {type(error).__name__}.",
                           PARAM) from error

    async def _fetch(self, link: str, folder: Path) -> Fetched:
        url = _url(link)
        limits = httpx.Limits(max_keepalive_connections=0)  # a connection is never reused for another host
        async with httpx.AsyncClient(trust_env=False, follow_redirects=False, limits=limits,
                                     timeout=self.limits.timeout) as client:
            for _ in range(self.limits.max_redirects + 1):
                if url.scheme not in ("http", "https") or not url.host:
                    raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' redirects to '{url}', not an http or "
                                                              "https URL.", PARAM)
                address = await self._resolve(link, url)
                request = client.build_request(
                    "GET", url.copy_with(host=address),
                    headers={"Host": url.netloc.decode("ascii").rpartition("@")[2],
                             "Accept": ACCEPT,
                             "Accept-Encoding": ACCEPT_ENCODING},
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
        raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' redirects more than {self.limits.max_redirects} "
                                                  "times (LINK_MAX_REDIRECTS).", PARAM)

    async def _save(self, link: str, url: httpx.URL, response: httpx.Response, folder: Path) -> Fetched:
        if response.status_code != 200:
            raise APIError(ErrorKind.INVALID_REQUEST, f"Fetching '{link}' answered {response.status_code}.", PARAM)
        kind = self._kind(link, url, response)
        limit = self.limits.max_bytes
        too_large = APIError(ErrorKind.PAYLOAD_TOO_LARGE, f"'{link}' is larger than {limit} bytes (LINK_MAX_BYTES).",
                             PARAM)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        try:
            decoder = BoundedDecoder(response.headers.get("content-encoding", ""), limit)
        except UnsupportedEncoding as error:
            raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' is sent with {error}, although it was asked for "
                                                      "uncompressed; links may be identity, gzip or deflate encoded.",
                           PARAM) from error
        body = bytearray()
        try:
            async for block in response.aiter_raw():  # as sent: decoded here, within the limit
                body += decoder.decode(block)
        except TooLarge as error:
            raise too_large from error
        except zlib.error as error:
            raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' is not valid {decoder.encoding} data.",
                           PARAM) from error
        if not body:
            raise APIError(ErrorKind.INVALID_REQUEST, f"'{link}' is empty.", PARAM)
        if kind not in BINARY:  # the loaders read UTF-8: re-encode what the page's charset says
            body = bytearray(bytes(body).decode(response.encoding or "utf-8", errors="replace").encode())
        suffix = suffix_of(kind)

        def write() -> Path:
            with tempfile.NamedTemporaryFile(dir=folder, suffix=suffix, delete=False) as handle:
                handle.write(body)
            return Path(handle.name)

        return Fetched(await asyncio.to_thread(write), kind)

    @staticmethod
    def _kind(link: str, url: httpx.URL, response: httpx.Response) -> str:
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if by_type := content_kind(content_type):
            return by_type
        by_suffix = SUPPORTED.get(Path(url.path).suffix.lower())
        if by_suffix and content_type in ("", "application/octet-stream", "binary/octet-stream"):
            return by_suffix
        raise APIError(
            ErrorKind.INVALID_REQUEST,
            f"'{link}' is {content_type or 'of no declared type'}; links may be HTML, PDF, Word, PowerPoint, Excel, "
            "CSV, JSON, plain text or Markdown.",
            PARAM,
        )
