"""What the backend's routes depend on (deps.py): the state (who is asking: tests/ovgenai_common/test_clients.py)."""

from __future__ import annotations

from types import SimpleNamespace

from starlette.requests import Request

from ovgenai_server.deps import get_state


def request(headers: dict[str, str], host: str | None = "10.0.0.5", state=None) -> Request:
    scope = {"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
             "client": (host, 5000) if host else None, "app": SimpleNamespace(state=SimpleNamespace(server=state))}
    return Request(scope)


def test_the_state_is_the_apps():
    state = object()
    assert get_state(request({}, state=state)) is state
