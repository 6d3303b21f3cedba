"""What the backend's routes depend on: the server's state, and who is asking."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ovgenai_common.clients import client_of

from .state import ServerState


def get_state(request: Request) -> ServerState:
    return request.app.state.server


StateDep = Annotated[ServerState, Depends(get_state)]
ClientDep = Annotated[str, Depends(client_of)]
