"""One streamed chat request timed as the benchmarks time it (bench/peers.py, bench/server_class.py): TTFT to the
first chunk that carries text, each later text chunk a token, the server's own usage for the counts."""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from bench.stats import RequestTiming


class Refused(Exception):
    """A 429 at admission: the server said at once that the request would wait too long (Retry-After)."""

    def __init__(self, retry_after: str):
        super().__init__(retry_after)
        self.retry_after = float(retry_after or 0)


async def stream_chat(client: httpx.AsyncClient, url: str, body: dict) -> tuple[RequestTiming, int]:
    timing = RequestTiming(time.perf_counter())
    usage: dict = {}
    async with client.stream("POST", url, json=body) as response:
        if response.status_code == 429:
            raise Refused(response.headers.get("Retry-After", ""))
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:500]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(f"error mid-stream: {chunk['error']}")
            choices = chunk.get("choices") or []
            # Only chunks with text count as tokens: not the role-only opener, not the finish chunk.
            if choices and (choices[0].get("delta") or {}).get("content"):
                timing.token_times.append(time.perf_counter())
            if chunk.get("usage"):
                usage = chunk["usage"]
    if not timing.token_times:
        raise RuntimeError("a stream ended without any text")
    timing.tokens = usage.get("completion_tokens", body["max_tokens"])
    return timing, usage.get("prompt_tokens", 0)


async def stream_conversations(url: str, model: str, conversations: list, output_tokens: int, concurrency: int,
                               timeout: float, catch: tuple[type[Exception], ...] = (Refused,)) -> tuple[list, float]:
    """Every conversation streamed `concurrency` at a time (fixed-length greedy answers): each result in order, its
    `(timing, prompt tokens)` or the exception of `catch` it raised, and the seconds all took."""
    # A connection per request: llama.cpp's server closes idle keep-alive connections after 5 s, and a request sent
    # on one as it closes fails ("Server disconnected without sending a response"); every server is treated alike.
    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=0)
    semaphore = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:

        async def one(messages):
            body = {"model": model, "messages": messages, "max_tokens": output_tokens, "temperature": 0,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            async with semaphore:
                try:
                    return await stream_chat(client, url + "/v1/chat/completions", body)
                except catch as error:
                    return error

        started = time.perf_counter()
        results = await asyncio.gather(*(one(messages) for messages in conversations))
        return results, time.perf_counter() - started


def prompt_tokens(url: str, model: str, messages: list, timeout: float) -> int:
    """The prompt tokens the server counts for `messages` (both servers must count alike before a run)."""
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
    response = httpx.post(url + "/v1/chat/completions", json=body, timeout=timeout)
    response.raise_for_status()
    return response.json()["usage"]["prompt_tokens"]
