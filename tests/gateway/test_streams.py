"""Both stream formats from LangChain's real message chunks: OpenAI chunks with the sources at the end, and OPEA's
`data: b'...'` lines, which OPEA's ChatQnA UIs parse."""

from __future__ import annotations

import ast
import asyncio
import json

from langchain_core.messages import AIMessageChunk

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.gateway.streams import Ending, frames, texts

PIECES = ["Fitch", " is a heron", " — it's purple.\n"]


async def _chunks(fail: bool = False):
    for piece in PIECES[1:]:
        yield AIMessageChunk(content=piece)
    if fail:
        raise ConnectionError("upstream closed")
    yield AIMessageChunk(content="", response_metadata={"finish_reason": "length"})


def _stream(fmt: str, fail: bool = False) -> list[str]:
    async def run() -> list[bytes]:
        ending = Ending()
        stream = frames(texts(AIMessageChunk(content=PIECES[0]), _chunks(fail), ending), ending, fmt, "chatqna",
                        closing=lambda: {"sources": [{"document": "a.txt"}]},
                        failed=lambda error: APIError(ErrorKind.UNAVAILABLE, f"LLM failed: {error}"))
        return [frame async for frame in stream]

    return [frame.decode() for frame in asyncio.run(run())]


def test_opea_format_is_python_bytes_reprs_then_done():
    frames = _stream("opea")
    assert frames[-1] == "data: [DONE]\n\n"
    payloads = [frame.removeprefix("data: ").removesuffix("\n\n") for frame in frames[:-1]]
    assert all(frame.startswith("data: b") for frame in frames[:-1])
    # Exactly what OPEA's megaservice writes: repr() of the UTF-8 bytes (non-ASCII as \x escapes).
    assert payloads == [repr(piece.encode()) for piece in PIECES]
    assert "".join(ast.literal_eval(p).decode() for p in payloads) == "".join(PIECES)


def test_openai_format_carries_role_first_and_sources_last():
    frames = _stream("openai")
    assert frames[-1] == "data: [DONE]\n\n"
    chunks = [json.loads(frame.removeprefix("data: ")) for frame in frames[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": PIECES[0]}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "".join(PIECES)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["sources"] == [{"document": "a.txt"}]
    assert all("sources" not in c for c in chunks[:-1])


def test_a_failing_upstream_ends_with_an_error_event_and_done_in_both_formats():
    for fmt in ("openai", "opea"):
        frames = _stream(fmt, fail=True)
        assert frames[-1] == "data: [DONE]\n\n"
        error = json.loads(frames[-2].removeprefix("data: "))["error"]
        assert "upstream closed" in error["message"] and error["type"] == "unavailable_error"


def test_include_usage_adds_the_upstreams_counts_after_the_last_choice():
    async def chunks():
        yield AIMessageChunk(content=" end", response_metadata={"finish_reason": "stop"})
        yield AIMessageChunk(content="", usage_metadata={"input_tokens": 7, "output_tokens": 2, "total_tokens": 9})

    async def run() -> list[bytes]:
        ending = Ending()
        stream = frames(texts(AIMessageChunk(content="The"), chunks(), ending), ending, "openai", "chatqna",
                        closing=dict, failed=lambda error: APIError(ErrorKind.UNAVAILABLE, str(error)),
                        include_usage=True)
        return [frame async for frame in stream]

    frames_sent = [frame.decode() for frame in asyncio.run(run())]
    usage = json.loads(frames_sent[-2].removeprefix("data: "))
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 7, "completion_tokens": 2,
                                                         "total_tokens": 9}
    assert json.loads(frames_sent[-3].removeprefix("data: "))["choices"][0]["finish_reason"] == "stop"
