"""What the backend's routes depend on: `StateDep = Annotated[ServerState, Depends(get_state)]`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .state import ServerState


def get_state(request: Request) -> ServerState:
    return request.app.state.server


StateDep = Annotated[ServerState, Depends(get_state)]
