"""What the backend's routes depend on (deps.py): the state, and who is asking: the key sent, or the address."""

from __future__ import annotations

from types import SimpleNamespace

from starlette.requests import Request

from ovgenai_server.deps import client_of, get_state


def request(headers: dict[str, str], host: str | None = "10.0.0.5", state=None) -> Request:
    scope = {"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
             "client": (host, 5000) if host else None, "app": SimpleNamespace(state=SimpleNamespace(server=state))}
    return Request(scope)


def test_a_client_is_its_key_wherever_it_calls_from_else_its_address():
    keyed = client_of(request({"Authorization": "Bearer k"}))
    assert keyed == client_of(request({"Authorization": "Bearer k"}, host="10.0.0.6")) and keyed.startswith("key:")
    assert client_of(request({})) == "address:10.0.0.5"
    assert client_of(request({}, host=None)) == "address:"


def test_the_state_is_the_apps():
    state = object()
    assert get_state(request({}, state=state)) is state
