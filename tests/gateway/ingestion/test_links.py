"""link_list parsing and the address guard's verdicts (the links fetched: system/test_link_ingestion.py)."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import replace

import pytest

from ovgenai_common.errors import APIError
from ovgenai_services.gateway.ingestion.links import LinkFetcher, LinkLimits, parse_link_list, why_refused

LIMITS = LinkLimits(max_bytes=1 << 20, timeout=30, max_redirects=5)


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.0.0.2", "loopback"), ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),  # an IPv4-mapped IPv6 address reaches the IPv4 one
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),  # cloud metadata lives at the first
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fd00::1", "private"),
    ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"), ("100.64.0.1", "not a public address"),
    # Ranges that Python 3.11's is_global calls global:
    ("2002:a00:1::1", "6to4"), ("2002:808:808::1", "6to4"),  # 6to4 carries an IPv4 address (10.0.0.1, 8.8.8.8)
    ("fec0::1", "site-local"), ("224.0.1.1", "multicast"), ("ff0e::1", "multicast"),
    ("192.0.0.9", "IETF protocol"), ("192.88.99.1", "6to4 relay"), ("64:ff9b:1::a00:1", "local-use NAT64"),
    ("3fff::1", "documentation"), ("5f00::1", "segment-routing"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"),  # Teredo: a relay reaches the IPv4 address inside
    ("64:ff9b::a00:1", "private"), ("64:ff9b::7f00:1", "loopback"),  # NAT64 to 10.0.0.1, 127.0.0.1
    ("::a00:1", "reserved"),  # IPv4-compatible (deprecated)
    ("::ffff:0:a00:1", "reserved"),  # IPv4-translated
])
def test_non_public_addresses_are_refused_and_say_why(address, reason):
    assert reason in why_refused(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "151.101.1.69", "2606:4700::1111", "::ffff:8.8.8.8",
                                     "64:ff9b::808:808"])  # NAT64 to a public address: how IPv6-only networks go out
def test_public_addresses_pass(address):
    assert why_refused(ipaddress.ip_address(address)) is None


def test_a_refused_name_is_not_resolved_for_the_client():
    fetcher = LinkFetcher(LIMITS)
    with pytest.raises(APIError) as refused:
        fetcher._check("http://db.internal/x", "db.internal", ipaddress.ip_address("10.20.30.40"))
    message = refused.value.message
    assert "db.internal resolves to a non-public address" in message and "10.20.30.40" not in message
    with pytest.raises(APIError) as literal:  # the client's own literal address may be named with the reason
        fetcher._check("http://10.20.30.40/x", "10.20.30.40", ipaddress.ip_address("10.20.30.40"))
    assert "10.20.30.40 is a private address" in literal.value.message
    allowed = LinkFetcher(replace(LIMITS, allowed_networks=(ipaddress.ip_network("10.0.0.0/8"),)))
    allowed._check("http://db.internal/x", "db.internal", ipaddress.ip_address("10.20.30.40"))  # no error


def test_link_list_is_opea_json_array():
    links = ["https://example.com/a", "http://example.org/b.pdf"]
    assert parse_link_list(json.dumps(links), 20) == links
    assert parse_link_list(None, 20) == [] and parse_link_list("  ", 20) == []


@pytest.mark.parametrize(("raw", "message"), [
    ("https://example.com", "JSON array"),  # a bare URL, not OPEA's JSON
    ('{"url": "https://example.com"}', "JSON array"),
    ("[1, 2]", "strings"),
    ('["ftp://example.com/file"]', "not an http or https URL"),
    ('["file:///etc/passwd"]', "not an http or https URL"),
    ('["https://"]', "URL"),
    (json.dumps([f"https://example.com/{i}" for i in range(3)]), "at most 2"),
])
def test_bad_link_lists_are_refused_with_the_reason(raw, message):
    with pytest.raises(APIError) as refused:
        parse_link_list(raw, 2)
    assert refused.value.status == 400 and refused.value.param == "link_list"
    assert message in refused.value.message
