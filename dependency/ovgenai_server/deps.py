"""What the backend's routes depend on: the server's state, and who is asking."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ovgenai_common.clients import client_of

from .lifecycle import Lifecycle
from .state import ServerState


def get_state(request: Request) -> ServerState:
    return request.app.state.server


def get_lifecycle(request: Request) -> Lifecycle | None:
    """What keeps the models in step with the repository; None for an app given its models in code (tests)."""
    return getattr(request.app.state, "lifecycle", None)


StateDep = Annotated[ServerState, Depends(get_state)]
LifecycleDep = Annotated[Lifecycle | None, Depends(get_lifecycle)]
ClientDep = Annotated[str, Depends(client_of)]
