"""Who is asking: the key sent (as a digest), wherever from, or else the address."""

from __future__ import annotations

from starlette.requests import Request

from ovgenai_common.clients import client_id, client_of


def request(headers: dict[str, str], host: str | None = "10.0.0.5") -> Request:
    return Request({"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
                    "client": (host, 5000) if host else None})


def test_a_client_is_its_key_or_its_address():
    assert client_id("Bearer k-1", "10.0.0.2") == client_id("Bearer k-1", "10.0.0.3")  # one key, wherever from
    assert client_id("Bearer k-1", "") != client_id("Bearer k-2", "")
    assert client_id("", "10.0.0.2") == "address:10.0.0.2"
    assert "k-1" not in client_id("Bearer k-1", "")


def test_an_http_request_is_its_key_wherever_it_calls_from_else_its_address():
    keyed = client_of(request({"Authorization": "Bearer k"}))
    assert keyed == client_of(request({"Authorization": "Bearer k"}, host="10.0.0.6")) and keyed.startswith("key:")
    assert client_of(request({})) == "address:10.0.0.5"
    assert client_of(request({}, host=None)) == "address:"
    assert client_of(request({"X-Api-Key": "k"}, host="10.0.0.7")) == keyed  # the same key, as Anthropic sends it
