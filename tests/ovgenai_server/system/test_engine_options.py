"""Engine options reach OpenVINO: each is shown by what the engine computes, compared with an in-process
ContinuousBatchingPipeline built with the same options, and with the option left out.

The KV-cache precision, the properties in --plugin_config (the value cache's quantization group, and the precision
hint) and the prefill budget (--max_num_batched_tokens: with split-fuse the prompt is computed in chunks of that
size, which changes the numerics when the KV cache is quantized, as u4 is) each change the numerics: the served log
probabilities of a greedy completion equal those of a pipeline built with every option, and differ from those of a
pipeline built without any one of them. The precision hint is the exception on CPUs without bf16 arithmetic (AVX2
only), where OpenVINO computes a bf16 hint in f32: there the served numbers equal the f32 ones, and the test id
says which branch ran. Prefix caching changes them too: a repeated block-aligned prompt is served from the cache,
computed in another shape. Without split-fuse, a step holds a whole sequence, so longer ones are refused."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from ovgenai_common.cpu import computed_precision
from tests.ovgenai_server.system.helpers import metric, pipeline_logprobs
from tests.support.servers import MODELS, RemoteServer

NATO = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
PROMPT_TOKENS = 64  # two whole KV blocks of 32 tokens; four prefill chunks of 16
NEW_TOKENS = 8
# --plugin_config: the hint, and a value-cache quantization group other than the default (observable on every CPU).
PLUGIN_CONFIG = {"INFERENCE_PRECISION_HINT": "bf16", "VALUE_CACHE_GROUP_SIZE": 16}
PROPERTIES = {**PLUGIN_CONFIG, "KV_CACHE_PRECISION": "u4"}
BF16_COMPUTES_IN = computed_precision("CPU", "bf16")
BATCHED_TOKENS = 16


@pytest.fixture(scope="module")
def prompt(default_model) -> list[int]:
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(MODELS / default_model))
    ids = [int(t) for t in tokenizer.encode(NATO * 8).input_ids.data[0][:PROMPT_TOKENS]]
    assert len(ids) == PROMPT_TOKENS
    return ids


@pytest.fixture(scope="module")
def tuned_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    # INFERENCE_PRECISION=f32 is what the server would use if the plugin config's hint were lost.
    args = ["--model", str(MODELS), "--kv_cache_precision", "u4", "--plugin_config",
            json.dumps(PLUGIN_CONFIG), "--max_num_batched_tokens", str(BATCHED_TOKENS),
            "--max_num_seqs", "16"]
    with RemoteServer("ovgenai_server", args, env={"INFERENCE_PRECISION": "f32"}) as server:
        yield server


def served_logprobs(server, model: str, prompt: list[int]) -> list[float]:
    body = {"model": model, "prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 0, "logprobs": 0,
            "ignore_eos": True}
    response = httpx.post(server.url + "/v1/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    logprobs = response.json()["choices"][0]["logprobs"]["token_logprobs"]
    assert len(logprobs) == NEW_TOKENS
    return logprobs


def in_process_logprobs(model: str, prompt: list[int], properties: dict, batched_tokens: int) -> list[float]:
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 1
    scheduler.max_num_batched_tokens = batched_tokens
    scheduler.max_num_seqs = 16
    pipeline = openvino_genai.ContinuousBatchingPipeline(str(MODELS / model), scheduler, "CPU", properties)
    config = openvino_genai.GenerationConfig(max_new_tokens=NEW_TOKENS, logprobs=1, ignore_eos=True)
    return pipeline_logprobs(pipeline, prompt, config)


def same(a: list[float], b: list[float]) -> bool:
    return np.allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("computes_in", [BF16_COMPUTES_IN], ids=lambda p: f"bf16-hint-computes-{p}")
def test_kv_precision_plugin_config_and_batch_budget_reach_the_engine(tuned_backend, default_model, prompt,
                                                                       computes_in):
    served = served_logprobs(tuned_backend, default_model, prompt)
    assert same(served, in_process_logprobs(default_model, prompt, PROPERTIES, BATCHED_TOKENS))
    without_kv = PLUGIN_CONFIG  # the device's own KV precision (u8)
    without_group = {**PROPERTIES, "VALUE_CACHE_GROUP_SIZE": 0}  # the plugin's own group
    assert not same(served, in_process_logprobs(default_model, prompt, without_kv, BATCHED_TOKENS))
    assert not same(served, in_process_logprobs(default_model, prompt, without_group, BATCHED_TOKENS))
    assert not same(served, in_process_logprobs(default_model, prompt, PROPERTIES, 512))
    without_hint = {**PROPERTIES, "INFERENCE_PRECISION_HINT": "f32"}  # what INFERENCE_PRECISION says
    # The hint reached the engine: it computes what this CPU makes of a bf16 hint, not the f32 that
    # INFERENCE_PRECISION asks for (on a CPU that computes bf16 hints in f32 the two are the same numbers).
    assert same(served, in_process_logprobs(default_model, prompt, without_hint, BATCHED_TOKENS)) == (
        computes_in == "f32")
    assert f"computes in {computes_in}" in tuned_backend.logs()


def test_prefix_caching_serves_a_repeated_prompt_from_the_cache(backend, default_model, prompt):
    """The session's backend runs with prefix caching on (the default). A prompt it has not seen is computed whole;
    its repeat finds both blocks cached and computes only the last token: other numerics. (With caching off,
    repeats are identical: test_precision_and_seed.)"""
    unseen = list(reversed(prompt))
    first = served_logprobs(backend, default_model, unseen)
    assert not same(first, served_logprobs(backend, default_model, unseen))


@pytest.fixture(scope="module")
def unsplit_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    args = ["--model", str(MODELS), "--dynamic_split_fuse", "false", "--max_num_batched_tokens", "48",
            "--max_num_seqs", "8"]
    with RemoteServer("ovgenai_server", args) as server:
        yield server


def test_without_split_fuse_a_sequence_must_fit_one_step(unsplit_backend, default_model, prompt):
    """One engine step then computes a whole prompt (or, after a preemption, a whole sequence), which the engine
    cannot do beyond max_num_batched_tokens: such requests are refused, and the engine keeps running."""
    url = unsplit_backend.url + "/v1/completions"
    long = httpx.post(url, json={"model": default_model, "prompt": prompt, "max_tokens": 4}, timeout=60)
    assert long.status_code == 400 and "48" in long.json()["error"]["message"], long.text
    fits = httpx.post(url, json={"model": default_model, "prompt": prompt[:32], "max_tokens": 16,
                                 "ignore_eos": True}, timeout=60)
    assert fits.status_code == 200 and fits.json()["usage"]["completion_tokens"] == 16, fits.text
    too_long = httpx.post(url, json={"model": default_model, "prompt": prompt[:32], "max_tokens": 17}, timeout=60)
    assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "max_tokens", too_long.text
    assert metric(unsplit_backend.url, "ovgenai:engine_restarts_total") == 0
    assert unsplit_backend.healthy()
