"""The relay's end-of-stream detection, on upstream byte streams a real backend can produce but rarely does."""

from __future__ import annotations

import httpx
import pytest

from microservices.llm.service import Backend
from microservices.llm.settings import LLMSettings


async def relay_of(chunks: list[bytes]) -> bytes:
    async def stream():
        for chunk in chunks:
            yield chunk

    transport = httpx.MockTransport(lambda _: httpx.Response(200, content=stream()))
    backend = Backend(LLMSettings(llm_endpoint="http://upstream"), transport=transport)
    response = await backend.open_stream("/v1/chat/completions", {})
    out = b"".join([part async for part in backend.relay(response)])
    await backend.close()
    return out


@pytest.mark.parametrize(
    "chunks",
    [
        [b'data: {"x": 1}\n\n', b"data: [DONE]\n\n"],
        [b'data: {"x": 1}\n\ndata: [DO', b"NE]\n\n"],  # split across reads
        [b"data: [DONE]\n\n", b": ping - 2026-11-22 05:00:00\r\n\r\n"],  # keep-alive after the end
    ],
)
async def test_complete_streams_pass_through_unchanged(chunks):
    assert await relay_of(chunks) == b"".join(chunks)


async def test_truncated_stream_gets_error_event_and_done():
    out = await relay_of([b'data: {"x": 1}\n\ndata: {"x"'])
    assert out.endswith(b"data: [DONE]\n\n") and b'"type":"upstream_error"' in out
