"""One request never takes the KV cache, or the engine, from the others. In a cache of 320 tokens (10 blocks):

- a request whose sequences can outgrow the whole cache is refused before it runs (a beam search of 6 went round
  forever, holding every other request with it, or failed them all with "does not fit");
- what fits is served beside it, and a max_tokens left unset is cut to what fits;
- n sampled choices run as requests of one sequence: openvino_genai's scheduler crashed the engine process when it
  preempted groups of several sampled sequences (four requests of n=4 here: exit -11 at once).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.ovgenai_server.system.test_bad_input import assert_error
from tests.support.servers import MODELS, RemoteServer

MODEL = "tiny-cache"


@pytest.fixture(scope="module")
def small_cache():
    # Prefix caching off: with it, openvino_genai 2026.4 can still crash when it preempts (README, Known limits).
    args = ["--model_path", str(MODELS / "HuggingFaceTB/SmolLM2-135M-Instruct"), "--served_model_name", MODEL,
            "--cache_size", "0.001", "--enable_prefix_caching", "false"]
    with RemoteServer("ovgenai_server", args) as server:
        yield server


def completions(server, bodies: list[dict]) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            return await asyncio.gather(*(http.post("/v1/completions", json={"model": MODEL, **body})
                                          for body in bodies))

    return asyncio.run(run())


def test_a_request_that_can_outgrow_the_cache_is_refused_and_the_rest_served(small_cache):
    beams = {"prompt": "once upon a time", "max_tokens": 60, "ignore_eos": True, "best_of": 6}
    fits = [{"prompt": "once upon a time", "max_tokens": 60, "ignore_eos": True, "best_of": 4, "n": 2},
            {"prompt": "a b c d", "max_tokens": 100, "ignore_eos": True}]
    replies = completions(small_cache, [beams, *fits] * 2)
    for refused in replies[0::3]:
        assert_error(refused, 400, "KV cache", "320 tokens", param="best_of")
    for served in replies[1::3] + replies[2::3]:
        assert served.status_code == 200, served.text
    assert metric(small_cache.url, "ovgenai:num_requests_running") == 0
    assert metric(small_cache.url, "ovgenai:engine_restarts_total") == 0


def test_an_unset_max_tokens_is_cut_to_what_fits(small_cache):
    [reply] = completions(small_cache, [{"prompt": "hi", "ignore_eos": True}])
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    assert 200 < usage["completion_tokens"] and usage["prompt_tokens"] + usage["completion_tokens"] <= 320
    explicit = completions(small_cache, [{"prompt": "hi", "max_tokens": 400, "ignore_eos": True}])[0]
    assert_error(explicit, 400, "at most", param="max_tokens")


def test_sampled_choices_under_preemption_do_not_stop_the_engine(small_cache):
    choices = {"prompt": "once upon a time", "max_tokens": 60, "ignore_eos": True, "n": 4, "temperature": 1}
    for _ in range(3):
        replies = completions(small_cache, [choices] * 4)  # 16 sequences of ~64 tokens in a cache of 320
        for reply in replies:
            assert reply.status_code == 200, reply.text
            assert sorted(choice["index"] for choice in reply.json()["choices"]) == [0, 1, 2, 3]
    assert metric(small_cache.url, "ovgenai:engine_restarts_total") == 0
