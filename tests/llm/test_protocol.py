"""OPEA's request conventions: string messages, stream by default unless the client asks for JSON only."""

from __future__ import annotations

import pytest

from microservices.llm.protocol import normalize_chat_body, wants_json_only
from ovgenai_common.errors import APIError


def test_string_messages_become_one_user_message():
    body, stream = normalize_chat_body({"messages": "hi"}, "m", "*/*")
    assert body == {"messages": [{"role": "user", "content": "hi"}], "model": "m", "stream": True}
    assert stream


@pytest.mark.parametrize(
    ("accept", "json_only"),
    [("application/json", True), ("application/json, text/event-stream", False), ("*/*", False), ("", False),
     ("text/event-stream", False), ("application/json; charset=utf-8", True)],
)
def test_accept_header(accept, json_only):
    assert wants_json_only(accept) is json_only


def test_explicit_stream_wins():
    _, stream = normalize_chat_body({"messages": "hi", "stream": False, "model": "x"}, None, "*/*")
    assert stream is False


@pytest.mark.parametrize("body", [[], {"messages": []}, {"messages": 3}, {"messages": "hi", "stream": "yes"},
                                  {"messages": "hi"}])
def test_bad_bodies(body):
    with pytest.raises(APIError):
        normalize_chat_body(body, None, "*/*")
