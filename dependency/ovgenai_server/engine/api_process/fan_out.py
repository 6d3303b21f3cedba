"""One request's outputs as the runtime hands them over: `n` sampled choices fanned out as n requests of one
sequence and merged back, and outputs that queued up while a client was slow merged into one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

import msgspec

from ..contract.types import GenerationParams, RequestOutput


def choices(params: GenerationParams) -> list[GenerationParams]:
    """`params.n` sampled choices as n requests of one sequence, choice i seeded seed + i when the request has a
    seed, so that it reproduces."""
    return [msgspec.structs.replace(params, n=1, seed=None if params.seed is None else (params.seed + i) % 2**64)
            for i in range(params.n)]


async def fan_out(streams: list[AsyncGenerator[RequestOutput, None]],
                  prompt_tokens: int) -> AsyncGenerator[RequestOutput, None]:
    """The one-sequence requests' outputs as one request's: request i's sequence as choice i. Closing it closes
    (aborts) every request."""
    queue: asyncio.Queue[tuple[int, RequestOutput | BaseException | None]] = asyncio.Queue()

    async def run(index: int, stream: AsyncGenerator[RequestOutput, None]) -> None:
        try:
            async with contextlib.aclosing(stream) as outputs:
                async for output in outputs:
                    await queue.put((index, output))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put((index, error))
        finally:
            await queue.put((index, None))

    tasks = [asyncio.create_task(run(index, stream)) for index, stream in enumerate(streams)]
    running, timings = len(streams), None
    try:
        while running:
            index, item = await queue.get()
            if item is None:
                running -= 1
                continue
            if isinstance(item, BaseException):
                raise item
            for delta in item.deltas:
                delta.index = index
            timings = item.timings or timings  # the phases of the choice that finished last
            if item.finished:  # a finished choice carries the engine's count (engine/engine_process/loop.py)
                prompt_tokens = item.prompt_tokens
            yield RequestOutput(item.deltas, finished=False, prompt_tokens=prompt_tokens)
        yield RequestOutput([], finished=True, prompt_tokens=prompt_tokens, timings=timings)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def merge(first: RequestOutput, second: RequestOutput) -> RequestOutput:
    """`second` folded into `first`: each choice's text, tokens and scores joined, the later prompt count kept."""
    by_index = {d.index: d for d in first.deltas}
    for delta in second.deltas:
        prior = by_index.get(delta.index)
        if prior is None:
            first.deltas.append(delta)
            by_index[delta.index] = delta
            continue
        prior.text += delta.text
        prior.token_count += delta.token_count
        prior.finish_reason = delta.finish_reason or prior.finish_reason
        prior.stop_reason = delta.stop_reason or prior.stop_reason
        if delta.logprobs:
            prior.logprobs = (prior.logprobs or []) + delta.logprobs
        if delta.token_ids:
            prior.token_ids = (prior.token_ids or []) + delta.token_ids
        if delta.prompt_logprobs:
            prior.prompt_logprobs = (prior.prompt_logprobs or []) + delta.prompt_logprobs
    first.finished = first.finished or second.finished
    first.timings = first.timings or second.timings
    first.prompt_tokens = second.prompt_tokens  # the later count: the engine's, on a request's last output
    return first
