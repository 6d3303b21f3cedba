"""The embedding service's request handling around the pipeline: what runs off the event loop, and the limits."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ovgenai_common.errors import APIError
from tests.embedding.stand_ins import service


async def test_tokenizing_and_decoding_run_off_the_event_loop():
    svc = service()
    texts = await svc.texts_of([[1, 2, 3]])
    await svc.embed(texts)
    assert svc.tokenizer.threads and threading.main_thread() not in svc.tokenizer.threads


async def test_tei_normalize():
    with pytest.raises(APIError, match="normalize"):
        await service(normalize=True).embed(["a"], normalize=False)
    raw = service(normalize=False)
    assert (await raw.embed(["a"])).vectors == [[3.0, 4.0]]
    assert (await raw.embed(["a"], normalize=True)).vectors == [pytest.approx([0.6, 0.8])]


def test_rerank_documents_are_bounded_per_request():
    svc = service(max_inputs=2)
    with pytest.raises(APIError, match="at most 2") as refused:
        asyncio.run(svc.rerank("q", ["a", "b", "c"]))
    assert refused.value.param == "documents"
    assert asyncio.run(svc.rerank("q", ["a", "b"])) == [(0, 1.0), (1, 1.0)]
