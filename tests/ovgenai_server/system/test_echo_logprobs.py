"""Completions' echo with logprobs, as evaluation harnesses use it: the prompt's own tokens scored by the served model
(null for the first), equal to what openvino_genai computes in this process; max_tokens 0 scores the prompt alone."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from tests.ovgenai_server.system.helpers import pipeline_logprobs
from tests.ovgenai_server.system.test_bad_input import assert_error
from tests.support.servers import MODELS, RemoteServer

PROMPT = "The capital of France is Paris, and the capital of Italy is Rome."


@pytest.fixture(scope="module")
def eval_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--enable_prefix_caching", "false"]) as server:
        yield server


def complete(server, body):
    return httpx.post(server.url + "/v1/completions", json=body, timeout=120)


def in_process_prompt_logprobs(model: str, prompt_ids: list[int]) -> list[float]:
    import openvino_genai

    from ovgenai_common.cpu import default_properties

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 1
    # The precision the server asks of this CPU: OpenVINO's own default is bf16 on any AVX512_BF16 CPU, where the
    # server computes in f32 unless the CPU has AMX.
    pipeline = openvino_genai.ContinuousBatchingPipeline(str(MODELS / model), scheduler, "CPU",
                                                         default_properties("CPU"))
    config = openvino_genai.GenerationConfig(max_new_tokens=0, echo=True, logprobs=1)
    # The first is the engine's placeholder for a token without context.
    return pipeline_logprobs(pipeline, prompt_ids, config)[1:]


def test_echo_scores_the_prompt_as_the_engine_does_in_process(eval_backend, default_model):
    ids = httpx.post(eval_backend.url + "/tokenize", json={"prompt": PROMPT}, timeout=30).json()["tokens"]
    body = complete(eval_backend, {"model": default_model, "prompt": PROMPT, "echo": True, "logprobs": 0,
                                   "max_tokens": 0}).json()
    choice = body["choices"][0]
    assert choice["text"] == PROMPT and choice["finish_reason"] == "length"
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(ids) == len(logprobs["token_logprobs"]) == len(logprobs["text_offset"])
    assert "".join(logprobs["tokens"]) == PROMPT
    assert logprobs["token_logprobs"][0] is None and all(v <= 0 for v in logprobs["token_logprobs"][1:])
    assert np.allclose(logprobs["token_logprobs"][1:], in_process_prompt_logprobs(default_model, ids), atol=1e-4)
    assert body["usage"] == {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)}

    # With new tokens too: the prompt's scores first, then each new token's, in one list (as vLLM answers).
    more = complete(eval_backend, {"model": default_model, "prompt": ids, "echo": True, "logprobs": 0,
                                   "max_tokens": 2, "temperature": 0, "ignore_eos": True}).json()["choices"][0]
    assert more["text"].startswith(PROMPT) and len(more["logprobs"]["tokens"]) == len(ids) + 2
    assert more["logprobs"]["token_logprobs"][: len(ids)] == logprobs["token_logprobs"]


def test_lm_evals_request_gets_each_token_as_its_one_alternative(eval_backend, default_model):
    """lm-evaluation-harness's loglikelihood request (token ids, echo, `logprobs: 1`, one new token), answered as OVMS
    answers it: the engine scores the chosen token only, so each position lists that token with its own score."""
    ids = httpx.post(eval_backend.url + "/tokenize", json={"prompt": PROMPT}, timeout=30).json()["tokens"]
    body = complete(eval_backend, {"model": default_model, "prompt": [ids], "echo": True, "logprobs": 1,
                                   "max_tokens": 1, "temperature": 0, "seed": 1234}).json()
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["top_logprobs"]) == len(logprobs["tokens"]) == len(ids) + 1
    assert logprobs["top_logprobs"][0] is None  # the prompt's first token has no score
    assert logprobs["top_logprobs"][1:] == [{token: value} for token, value in
                                            zip(logprobs["tokens"][1:], logprobs["token_logprobs"][1:], strict=True)]


def test_echo_with_logprobs_streams_the_scored_prompt_first(eval_backend, default_model):
    body = {"model": default_model, "prompt": PROMPT, "echo": True, "logprobs": 0, "max_tokens": 2,
            "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", eval_backend.url + "/v1/completions", json=body, timeout=120) as response:
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    first = chunks[0]["choices"][0]
    assert first["text"] == PROMPT and first["logprobs"]["token_logprobs"][0] is None
    assert len(first["logprobs"]["tokens"]) > 10
    generated = [c["choices"][0] for c in chunks[1:] if c["choices"] and c["choices"][0]["text"]]
    assert generated and all(c["logprobs"]["token_logprobs"][0] is not None for c in generated)


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_in_the_first_new_token_keeps_the_echoed_scores(eval_backend, default_model, stream):
    """The engine dropped the token the stop string began in, and the prompt's scores with it: the answer paired 5
    prompt tokens with no scores, and a stream never sent the echo."""
    ids = httpx.post(eval_backend.url + "/tokenize", json={"prompt": "The capital of France is"},
                     timeout=30).json()["tokens"]
    body = {"model": default_model, "prompt": "The capital of France is", "echo": True, "logprobs": 0,
            "max_tokens": 8, "temperature": 0}
    greedy = complete(eval_backend, body).json()["choices"][0]["text"]
    stop = greedy[len("The capital of France is"):].split()[0]  # the first new word, without its space
    body.update(stop=[stop], stream=stream)
    if stream:
        with httpx.stream("POST", eval_backend.url + "/v1/completions", json=body, timeout=120) as response:
            chunks = [json.loads(line[6:])["choices"][0] for line in response.iter_lines()
                      if line.startswith("data: {")]
        text = "".join(chunk["text"] for chunk in chunks)
        scored = [value for chunk in chunks if chunk["logprobs"] for value in chunk["logprobs"]["token_logprobs"]]
    else:
        choice = complete(eval_backend, body).json()["choices"][0]
        text, scored = choice["text"], choice["logprobs"]["token_logprobs"]
    assert text == greedy[: greedy.index(stop, len("The capital of France is"))]
    assert len(scored) > len(ids) and scored[0] is None and all(v is not None for v in scored[1:])


def test_max_tokens_zero_echoes_the_prompt_with_prefix_caching_on(backend, default_model):
    body = complete(backend, {"model": default_model, "prompt": PROMPT, "echo": True, "max_tokens": 0}).json()
    assert body["choices"][0]["text"] == PROMPT and body["usage"]["completion_tokens"] == 0


def test_what_echo_cannot_do_is_refused(backend, default_model):
    response = complete(backend, {"model": default_model, "prompt": PROMPT, "max_tokens": 0})
    assert_error(response, 400, "echo", param="max_tokens")
    # The default server caches prompt prefixes; the engine does not score a prefix it takes from the cache.
    response = complete(backend, {"model": default_model, "prompt": PROMPT, "echo": True, "logprobs": 0})
    assert_error(response, 400, "--enable_prefix_caching false", param="echo")
    response = httpx.post(backend.url + "/v1/chat/completions", timeout=30,
                          json={"model": default_model, "messages": [{"role": "user", "content": "hi"}],
                                "max_tokens": 0})
    assert_error(response, 400, param="max_tokens")
    response = complete(backend, {"model": default_model, "prompt": PROMPT, "max_tokens": -1})
    assert_error(response, 400, param="max_tokens")
