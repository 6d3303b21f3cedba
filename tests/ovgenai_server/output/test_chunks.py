"""Stream chunks: every chunk of a stream shares its envelope; the last one of a choice names the stop string it
ended at, as vLLM's does."""

from __future__ import annotations

import json

from ovgenai_server.output.chunks import StreamChunks


def parsed(frame: bytes) -> dict:
    return json.loads(frame.removeprefix(b"data: "))


def test_a_choice_s_last_chunk_says_its_stop_reason_and_the_others_do_not():
    chunks = StreamChunks("chatcmpl-1", "chat", "m")
    text = parsed(chunks.choice(0, delta={"content": "Hi"}))
    last = parsed(chunks.choice(0, "stop", None, "\n", delta={}))
    assert "stop_reason" not in text["choices"][0]
    assert (last["choices"][0]["finish_reason"], last["choices"][0]["stop_reason"]) == ("stop", "\n")
    assert {key: text[key] for key in ("id", "object", "created", "model")} == \
        {key: last[key] for key in ("id", "object", "created", "model")}
    assert text["object"] == "chat.completion.chunk"


def test_the_usage_chunk_has_no_choices():
    usage = parsed(StreamChunks("cmpl-1", "completion", "m").usage({"prompt_tokens": 1}))
    assert usage["object"] == "text_completion" and usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 1}
