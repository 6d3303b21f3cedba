"""Who is asking: the key a request was let in with (as a digest), wherever from; else its address, and nothing the
request says; X-Forwarded-For only from the proxies the operator lists."""

from __future__ import annotations

import socket

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from starlette.requests import Request as StarletteRequest

from ovgenai_common.app import run_app
from ovgenai_common.clients import KEY, client_id, client_of, key_digest
from ovgenai_common.security import APIKeyMiddleware
from ovgenai_common.settings import ServiceSettings


def request(headers: dict[str, str], host: str | None = "10.0.0.5", key: str | None = None) -> StarletteRequest:
    return StarletteRequest({"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
                             "client": (host, 5000) if host else None, "state": {KEY: key} if key else {}})


def test_a_client_is_its_checked_key_or_its_address():
    assert client_id(key_digest(b"k-1"), "10.0.0.2") == client_id(key_digest(b"k-1"), "10.0.0.3")
    assert client_id(key_digest(b"k-1"), "") != client_id(key_digest(b"k-2"), "")
    assert client_id(None, "10.0.0.2") == "address:10.0.0.2"
    assert "k-1" not in client_id(key_digest(b"k-1"), "")


def test_without_a_checked_key_what_a_request_says_is_no_identity():
    """13 made-up bearer values took every place of a backend without a key, and 19 pushed another client's stored
    response out: each value was counted as a client of its own."""
    made_up = {client_of(request({"Authorization": f"Bearer fake-{i}", "X-Api-Key": f"x{i}"})) for i in range(13)}
    assert made_up == {"address:10.0.0.5"} == {client_of(request({}))}
    assert client_of(request({}, host=None)) == "address:"
    assert client_of(request({}, key=key_digest(b"k"))) == client_of(request({}, host="10.0.0.9", key=key_digest(b"k")))


async def test_the_key_check_says_who_it_let_in():
    app = FastAPI()

    @app.get("/who")
    async def who(req: Request) -> dict:
        return {"client": client_of(req)}

    app.add_middleware(APIKeyMiddleware, api_key="k")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        bearer = (await http.get("/who", headers={"Authorization": "Bearer k"})).json()["client"]
        anthropic = (await http.get("/who", headers={"X-Api-Key": "k"})).json()["client"]
        assert (await http.get("/who", headers={"Authorization": "Bearer other"})).status_code == 401
    assert bearer == anthropic == "key:" + key_digest(b"k")


@pytest.mark.parametrize(("allowed", "proxy_headers"), [([], False), (["10.0.0.1", "10.1.0.0/16"], True)])
def test_forwarded_for_is_believed_only_from_the_proxies_listed(monkeypatch, allowed, proxy_headers):
    """uvicorn's own default believed X-Forwarded-For from loopback, where every other service of the stack is."""
    configs: list[uvicorn.Config] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, **_sockets: configs.append(server.config))
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    run_app(FastAPI(), ServiceSettings(forwarded_allow_ips=",".join(allowed)), sock=socket.socket())
    assert configs[0].proxy_headers is proxy_headers and configs[0].forwarded_allow_ips == allowed
