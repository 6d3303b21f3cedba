"""What the tests read off the services' answers: an error in OpenAI's shape, an APIError raised by a call, and the
events of a server-sent stream (plain `data:` lines, or named events whose name is their type)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ovgenai_common.errors import APIError, ErrorKind


def refused(reply: httpx.Response, code: str, param: str | None = None, status: int = 400) -> dict[str, Any]:
    """The reply is an error in OpenAI's shape with this code (and param, when given); its `error` object."""
    assert reply.status_code == status, (reply.status_code, reply.text[:300])
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code, error
    assert param is None or error["param"] == param, error
    return error


def raised(call: Callable[..., Any], *args: Any, kind: ErrorKind | None = None, **kwargs: Any) -> APIError:
    """The APIError `call(*args, **kwargs)` raises (of `kind`, when given)."""
    with pytest.raises(APIError) as error:
        call(*args, **kwargs)
    assert kind is None or error.value.kind is kind, error.value
    return error.value


def stream_events(text: str) -> list[dict]:
    """The JSON events of a server-sent stream, in order (its `[DONE]` left out)."""
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: {")]


def named_events(text: str) -> list[dict]:
    """The events of a stream whose events are named (Anthropic's, the Responses API's), each checked to carry its
    type as its name."""
    events = []
    for block in text.strip().split("\n\n"):
        name, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}", block
        events.append(event)
    return events
