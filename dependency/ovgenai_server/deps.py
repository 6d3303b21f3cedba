"""What the backend's routes depend on: the server's state, and who is asking."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .fair_share import client_id
from .state import ServerState


def get_state(request: Request) -> ServerState:
    return request.app.state.server


def client_of(request: Request) -> str:
    """Who is asking, as the places of the server are shared (fair_share.py)."""
    return client_id(request.headers.get("authorization", ""), request.client.host if request.client else "")


StateDep = Annotated[ServerState, Depends(get_state)]
ClientDep = Annotated[str, Depends(client_of)]
