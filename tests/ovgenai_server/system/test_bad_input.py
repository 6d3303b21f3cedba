"""Bad input gets a clear OpenAI-style 4xx, and leaves nothing running in the engine."""

from __future__ import annotations

import httpx
import pytest

from ovgenai_server.api.protocol import MAX_STOP_STRINGS
from tests.ovgenai_server.system.helpers import metric, stream_errors
from tests.support.servers import wait_until

MESSAGES = [{"role": "user", "content": "hi"}]


def post(backend, body, path="/v1/chat/completions", **kwargs):
    return httpx.post(backend.url + path, timeout=60, **({"json": body} if body is not None else {}), **kwargs)


def assert_error(response, status, *fragments, param=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    for fragment in fragments:
        assert fragment in error["message"], error["message"]
    if param is not None:
        assert error["param"] == param


def test_malformed_json(backend):
    response = post(backend, None, content=b'{"model": ', headers={"content-type": "application/json"})
    assert_error(response, 400, "JSON")


def test_missing_messages(backend, default_model):
    assert_error(post(backend, {"model": default_model}), 400, "messages", param="messages")


def test_wrong_type(backend, default_model):
    response = post(backend, {"model": default_model, "messages": MESSAGES, "max_tokens": "many"})
    assert_error(response, 400, "max_tokens", param="max_tokens")


def test_unknown_model_is_404(backend):
    response = post(backend, {"model": "no-such-model", "messages": MESSAGES})
    assert_error(response, 404, "no-such-model", param="model")
    assert response.json()["error"]["code"] == "model_not_found"


def test_prompt_longer_than_context_names_both_lengths(backend, default_model):
    long_text = "word " * 5000
    response = post(backend, {"model": default_model, "messages": [{"role": "user", "content": long_text}]})
    assert_error(response, 400, "4096", "tokens", param="messages")


def test_max_tokens_beyond_limit(backend, default_model):
    response = post(backend, {"model": default_model, "messages": MESSAGES, "max_tokens": 100000})
    assert_error(response, 400, "100000", "4096", param="max_tokens")


def test_n_and_best_of_limits(backend, default_model):
    assert_error(post(backend, {"model": default_model, "messages": MESSAGES, "n": 50}), 400, param="n")
    response = post(backend, {"model": default_model, "prompt": "x", "best_of": 50}, "/v1/completions")
    assert_error(response, 400, "best_of", param="best_of")
    response = post(backend, {"model": default_model, "messages": MESSAGES, "best_of": 2, "stream": True})
    assert_error(response, 400, "stream", param="best_of")


def test_too_many_stop_strings(backend, default_model):
    response = post(backend, {"model": default_model, "messages": MESSAGES,
                              "stop": [f"stop {i}" for i in range(MAX_STOP_STRINGS + 1)]})
    assert_error(response, 400, f"at most {MAX_STOP_STRINGS}", param="stop")


def test_unsupported_parameter_is_named(backend, default_model):
    response = post(backend, {"model": default_model, "messages": MESSAGES, "logit_bias": {"1": 5}})
    assert_error(response, 400, "logit_bias", param="logit_bias")


def test_top_logprobs_refused(backend, default_model):
    response = post(backend, {"model": default_model, "messages": MESSAGES, "logprobs": True, "top_logprobs": 3})
    assert_error(response, 400, param="top_logprobs")


def test_body_over_limit_is_413(backend, default_model):
    huge = {"model": default_model, "messages": [{"role": "user", "content": "x" * (17 * 1024 * 1024)}]}
    assert_error(post(backend, huge), 413, "limit")


def test_unknown_route_is_openai_404(backend):
    assert_error(httpx.get(backend.url + "/v1/nothing-here"), 404)


def idle(backend) -> bool:
    """Nothing running in the engine, nothing queued for it or held by the server."""
    return metric(backend.url, "ovgenai:num_requests_running") == 0 == metric(backend.url,
                                                                               "ovgenai:num_requests_waiting")


@pytest.mark.parametrize(
    ("path", "body", "engine_refuses"),
    [
        ("/v1/chat/completions", {"messages": [], "prompt": ""}, False),  # refused before the engine
        ("/v3/completions", {"messages": [], "prompt": ""}, False),
        # 5e-324 is positive as a double but 0 as the engine's float: refused before the engine, which refused it
        # itself (engine/test_loop.py keeps that path: a request the engine refuses fails alone).
        ("/v1/chat/completions", {"messages": MESSAGES, "repetition_penalty": 5e-324}, False),
        ("/v1/completions", {"prompt": "hi", "best_of": 2, "presence_penalty": 1}, False),
    ],
)
def test_nothing_left_running(backend, default_model, path, body, engine_refuses):
    wait_until(lambda: idle(backend), 10, message="idle engine")
    generated = metric(backend.url, "ovgenai:generation_tokens_total")
    failures = metric(backend.url, "ovgenai:request_failure_total", default_model)
    assert post(backend, {"model": default_model, **body}, path).status_code == 400
    # Read as soon as the answer is in: the refused request left nothing behind, and is counted as a failure
    # exactly when it had reached the engine.
    assert idle(backend)
    assert metric(backend.url, "ovgenai:generation_tokens_total") == generated
    assert metric(backend.url, "ovgenai:request_failure_total", default_model) - failures == int(engine_refuses)


VOCABULARY = 49152  # SmolLM2's tokenizer


@pytest.mark.parametrize("path", ["/v1/completions", "/v3/completions"])
@pytest.mark.parametrize(
    ("prompt", "shown"),
    [
        ([-6038], "-6038"),
        ([99999999], "99999999"),
        ([VOCABULARY], str(VOCABULARY)),
        ([-86583156084338036285721920143360], "-8658315608433803628…"),  # beyond int64
        ([[1, 2], [3, 2**63]], str(2**63)),
    ],
)
def test_token_ids_outside_the_vocabulary_are_400(backend, default_model, path, prompt, shown):
    before = metric(backend.url, "ovgenai:request_success_total")
    response = post(backend, {"model": default_model, "prompt": prompt, "max_tokens": 5}, path=path)
    assert_error(response, 400, f"Token id {shown} in 'prompt' is outside the model's vocabulary "
                 f"(ids 0 to {VOCABULARY - 1})", param="prompt")
    assert metric(backend.url, "ovgenai:request_success_total") == before  # nothing was generated


def test_the_last_id_of_the_vocabulary_is_accepted(backend, default_model):
    response = post(backend, {"model": default_model, "prompt": [1, VOCABULARY - 1], "max_tokens": 2},
                    path="/v1/completions")
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"role": "tool"}, "'tool' message needs 'content' and 'tool_call_id'"),
        ({"role": "tool", "content": "42"}, "'tool' message needs 'content' and 'tool_call_id'"),
        ({"role": "assistant"}, "'assistant' message needs 'content' or 'tool_calls'"),
        ({"role": "user"}, "'user' message needs 'content'"),
    ],
)
def test_messages_validated_as_openai_does(backend, default_model, message, fragment):
    response = post(backend, {"model": default_model, "messages": [message]})
    assert_error(response, 400, fragment, param="messages.0")


def test_a_bad_content_part_is_named_not_the_string_content_could_have_been(backend, default_model):
    """It said "Input should be a valid string" about a list of parts (the first member of the union)."""
    parts = [{"type": "text", "text": "hi"}, {"type": "input_audio", "input_audio": {"data": ""}}]
    response = post(backend, {"model": default_model, "messages": [{"role": "user", "content": parts}]})
    assert_error(response, 400, "input_audio", param="messages.0.content.1")


def test_a_value_the_engine_cannot_hold_is_refused_naming_it_not_source_paths(backend, default_model):
    # 5e-324 is positive as a double but 0 as the engine's float: the engine refused it with its source path.
    response = post(backend, {"model": default_model, "messages": MESSAGES, "repetition_penalty": 5e-324})
    assert_error(response, 400, "repetition_penalty", param="repetition_penalty")
    assert "failed at" not in response.json()["error"]["message"] and ".cpp" not in response.json()["error"]["message"]


LONE_SURROGATE = '"hi \\ud800"'  # as the client's JSON spells it


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/completions", '{"model": "%s", "prompt": ' + LONE_SURROGATE + ', "max_tokens": 2}'),
    ("/v1/completions", '{"model": "%s", "prompt": "x", "max_tokens": 2, "stop": [' + LONE_SURROGATE + ']}'),
    ("/v1/chat/completions", '{"model": ' + LONE_SURROGATE + ', "messages": [{"role": "user", "content": "x"}]}'),
    ("/tokenize", '{"model": "%s", "prompt": ' + LONE_SURROGATE + '}'),
    ("/v1/completions", '{"model": "%s", "prompt": "x", "max_tokens": 2, "repetition_penalty": Infinity}'),
])
def test_text_that_is_not_json_is_400_not_500(backend, default_model, path, body):
    """Python's parser takes an unpaired surrogate escape (a str no encoder takes: every later encode() was a 500)
    and Infinity; JSON has neither (ovgenai_common/body.py)."""
    reply = httpx.post(backend.url + path, content=body.replace("%s", default_model), timeout=60,
                       headers={"Content-Type": "application/json"})
    assert_error(reply, 400, "unpaired surrogate")


@pytest.mark.parametrize("stream", [False, True])
def test_a_top_k_past_every_integer_the_engine_holds_means_every_token(backend, default_model, stream):
    """top_k 2**64 overflowed the engine's integer: a 500, and a stream cut short after its headers."""
    body = {"model": default_model, "prompt": "Hello", "max_tokens": 3, "top_k": 2**64, "stream": stream}
    reply = httpx.post(backend.url + "/v1/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    if stream:
        assert reply.text.rstrip().endswith("data: [DONE]") and not stream_errors(reply.text)
    else:
        assert reply.json()["usage"]["completion_tokens"] == 3


def test_a_request_larger_than_the_server_holds_is_400_not_a_retryable_429(backend, default_model):
    """A retry cannot help: the OpenAI SDK would retry a 429 forever."""
    body = {"model": default_model, "prompt": ["hi"] * 2000, "n": 4, "temperature": 1, "max_tokens": 1}
    reply = post(backend, body, "/v1/completions")
    assert_error(reply, 400, "a request may ask for at most", param="prompt")
    assert "retry-after" not in reply.headers


def test_ignore_eos_with_an_output_constraint_is_400(backend, default_model):
    """The grammar ends with the end of sequence that ignore_eos skips: the answer went on unconstrained."""
    body = {"model": default_model, "messages": MESSAGES, "max_tokens": 20, "ignore_eos": True,
            "structured_outputs": {"choice": ["yes"]}}
    assert_error(post(backend, body), 400, "ignore_eos", param="ignore_eos")
    body["response_format"] = {"type": "json_object"}
    del body["structured_outputs"]
    assert_error(post(backend, body), 400, param="ignore_eos")


@pytest.mark.parametrize("temperature", [1e-40, 1e-300])
def test_a_near_zero_temperature_answers_as_greedy_decoding(backend, default_model, temperature):
    """The engine's 32-bit float made 1e-40 a denormal (random tokens) and 1e-300 zero (a 400 naming no field)."""
    body = {"model": default_model, "prompt": "The capital of France is", "max_tokens": 8}
    greedy = post(backend, {**body, "temperature": 0}, "/v1/completions")
    near_zero = post(backend, {**body, "temperature": temperature}, "/v1/completions")
    assert greedy.status_code == near_zero.status_code == 200, near_zero.text
    assert near_zero.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]
