"""A request's generation parameters (request/sampling.py). Sampling values reach the engine as it holds them: 32-bit
floats, where a tiny temperature or top_p was a denormal or zero (random tokens, or the engine's own refusal naming no
field). What cannot be combined is refused naming the field: beam search with penalties, several sequences with an
output constraint, prompt lookup's parameters on another model (with OVMS's defaults on a prompt lookup one)."""

from __future__ import annotations

import pydantic
import pytest

from ovgenai_common.errors import APIError
from ovgenai_server.api.protocol import ChatCompletionRequest, CompletionRequest
from ovgenai_server.engine.contract.types import StructuredOutput
from ovgenai_server.engine.engine_process.generation_config import build_generation_config
from ovgenai_server.models.generation_defaults import GenerationDefaults
from ovgenai_server.request.sampling import build_params, chat_logprobs_asked, completion_logprobs_asked

LIMITS = {"prompt_tokens": 10, "max_context": 100, "best_of_limit": 4, "max_n": 4}


def chat(**fields) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **fields)


def structured(**fields) -> StructuredOutput | None:
    return build_params(chat(**fields), **LIMITS).structured_output


@pytest.mark.parametrize("temperature", [1e-300, 1e-40, 1e-6])
def test_a_temperature_below_the_sampling_epsilon_decodes_greedily(temperature):
    params = build_params(chat(temperature=temperature), **LIMITS)
    assert not params.do_sample and params.temperature == 0
    build_generation_config(params, [2]).validate()


def test_a_temperature_at_the_epsilon_samples():
    params = build_params(chat(temperature=1e-5), **LIMITS)
    assert params.do_sample
    config = build_generation_config(params, [2])
    config.validate()
    assert config.temperature == pytest.approx(1e-5)


def test_n_with_a_near_zero_temperature_is_refused_as_greedy():
    with pytest.raises(APIError) as error:
        build_params(chat(n=2, temperature=1e-9), **LIMITS)
    assert error.value.param == "n" and "1e-05" in error.value.message


@pytest.mark.parametrize("top_p", [1e-300, 1e-40])
def test_a_top_p_below_what_the_engine_holds_keeps_the_likeliest_token(top_p):
    config = build_generation_config(build_params(chat(temperature=1, top_p=top_p), **LIMITS), [2])
    config.validate()  # it said "top_p must be a positive float > 0.0 and <= 1.0, but got 0"
    assert 0 < config.top_p < 1e-37


@pytest.mark.parametrize("penalty", [1e-300, 1e-40, 1e39, float(2**128)])
def test_a_repetition_penalty_outside_32_bit_floats_is_refused(penalty):
    with pytest.raises(pydantic.ValidationError) as error:
        chat(repetition_penalty=penalty)
    assert error.value.errors()[0]["loc"] == ("repetition_penalty",)


@pytest.mark.parametrize("penalty", [1e-30, 1.2, 1e30])
def test_a_repetition_penalty_the_engine_holds_reaches_it(penalty):
    config = build_generation_config(build_params(chat(repetition_penalty=penalty), **LIMITS), [2])
    config.validate()
    assert config.repetition_penalty == pytest.approx(penalty, rel=1e-6)


@pytest.mark.parametrize("min_p", [1.0, 0.99999999])  # the second is 1 as a float32
def test_a_min_p_of_one_keeps_the_likeliest_token(min_p):
    config = build_generation_config(build_params(chat(temperature=1, min_p=min_p), **LIMITS), [2])
    config.validate()  # it said "min_p must be in [0.0, 1.0), but got 1"
    assert 0.9999 < config.min_p < 1


@pytest.mark.parametrize(("field", "value"), [("presence_penalty", 0.5), ("frequency_penalty", -1.0),
                                               ("repetition_penalty", 1.2)])
def test_beam_search_with_a_penalty_is_refused_naming_it(field, value):
    with pytest.raises(APIError) as error:
        build_params(chat(best_of=2, **{field: value}), **LIMITS)
    assert error.value.param == field and "beam search" in error.value.message


def test_beam_search_with_neutral_penalties_is_accepted():
    params = build_params(chat(best_of=2, presence_penalty=0, frequency_penalty=0.0, repetition_penalty=1),
                          **LIMITS)
    build_generation_config(params, [2]).validate()


def test_stream_options_without_a_stream_are_refused_as_openai_does():
    with pytest.raises(APIError) as error:
        build_params(chat(stream_options={"include_usage": True}), **LIMITS)
    assert error.value.param == "stream_options"
    build_params(chat(stream=True, stream_options={"include_usage": True, "include_obfuscation": False}), **LIMITS)


@pytest.mark.parametrize("fields", [{"stream": True, "stream_options": {"continuous_usage_stats": True}},
                                    {"response_format": {"type": "json_object", "strict": True}}])
def test_unknown_options_inside_an_object_are_refused_naming_them(fields):
    """They were dropped silently, as if the server did what they ask."""
    with pytest.raises(pydantic.ValidationError) as error:
        chat(**fields)
    assert len(error.value.errors()[0]["loc"]) == 2


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 2, "temperature": 1.0}, "n"),
        ({"best_of": 2}, "best_of"),
        ({"n": 2, "best_of": 3}, "best_of"),
    ],
)
@pytest.mark.parametrize(
    "constraint",
    [{"structured_outputs": {"choice": ["a", "b"]}}, {"guided_regex": "a+"},
     {"response_format": {"type": "json_object"}}],
)
def test_several_sequences_per_request_cannot_be_constrained_on_this_engine(fields, param, constraint):
    """openvino_genai 2026.4 keeps only one sampled sequence in the grammar and beam search ignores it."""
    with pytest.raises(APIError) as error:
        structured(**fields, **constraint)
    assert error.value.param == param and "constraint" in error.value.message
    assert build_params(chat(**fields), **LIMITS).structured_output is None  # unconstrained, the request is taken


def test_a_prompt_lookup_model_gets_ovms_defaults_or_the_requests_values():
    params = build_params(chat(), prompt_lookup=True, **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (5, 3)
    params = build_params(chat(num_assistant_tokens=8, max_ngram_size=2), prompt_lookup=True, **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (8, 2)
    config = build_generation_config(params, [2])
    assert config.num_assistant_tokens == 8 and config.max_ngram_size == 2


def test_other_models_decode_as_usual_and_refuse_the_parameters():
    params = build_params(chat(), **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (0, 0)
    assert not build_generation_config(params, [2]).num_assistant_tokens
    with pytest.raises(APIError) as error:
        build_params(chat(num_assistant_tokens=4), **LIMITS)
    assert error.value.param == "num_assistant_tokens" and "prompt_lookup" in error.value.message


def test_beam_search_is_refused_naming_the_setting_and_n_is_served():
    with pytest.raises(APIError) as error:
        build_params(chat(best_of=2), prompt_lookup=True, **LIMITS)
    assert error.value.param == "best_of" and "prompt_lookup" in error.value.message
    params = build_params(chat(n=2, temperature=1.0), prompt_lookup=True, **LIMITS)  # run as two requests of one
    assert params.n == 2 and params.num_assistant_tokens > 0


@pytest.mark.parametrize("top_logprobs, engine_logprobs", [(None, 1), (0, 1), (1, 1)])
def test_chat_top_logprobs_up_to_the_one_alternative_the_engine_knows(top_logprobs, engine_logprobs):
    assert chat_logprobs_asked(chat(logprobs=True, top_logprobs=top_logprobs)) == engine_logprobs
    assert chat_logprobs_asked(chat()) == 0


@pytest.mark.parametrize("fields, fragment", [
    ({"logprobs": True, "top_logprobs": 2}, "at most 1"),
    ({"top_logprobs": 1}, "needs 'logprobs'"),
])
def test_chat_top_logprobs_beyond_it_are_refused_naming_the_field(fields, fragment):
    with pytest.raises(APIError) as refused:
        chat_logprobs_asked(chat(**fields))
    assert refused.value.param == "top_logprobs" and fragment in str(refused.value)


@pytest.mark.parametrize("logprobs, engine_logprobs", [(None, 0), (0, 1), (1, 1)])
def test_completion_logprobs_up_to_one_alternative(logprobs, engine_logprobs):
    assert completion_logprobs_asked(CompletionRequest(prompt="hi", logprobs=logprobs)) == engine_logprobs


def test_completion_logprobs_beyond_one_are_refused_naming_the_field():
    with pytest.raises(APIError) as refused:
        completion_logprobs_asked(CompletionRequest(prompt="hi", logprobs=5))
    assert refused.value.param == "logprobs" and "at most 1" in str(refused.value)


def test_a_draft_model_proposes_its_tokens_or_the_requests_and_refuses_beam_search_and_ngrams():
    params = build_params(chat(), draft_tokens=5, **LIMITS)
    assert (params.num_assistant_tokens, params.max_ngram_size) == (5, 0)
    assert build_params(chat(num_assistant_tokens=2), draft_tokens=5, **LIMITS).num_assistant_tokens == 2
    assert build_generation_config(build_params(chat(), draft_tokens=3, **LIMITS), [2]).num_assistant_tokens == 3
    for fields, param in (({"best_of": 2}, "best_of"), ({"max_ngram_size": 2}, "max_ngram_size")):
        with pytest.raises(APIError) as error:
            build_params(chat(**fields), draft_tokens=5, **LIMITS)
        assert error.value.param == param and "draft model" in error.value.message
    assert build_params(chat(n=2, temperature=1.0), draft_tokens=5, **LIMITS).n == 2  # run as two requests of one


def test_min_tokens_reaches_the_engine_within_the_request_s_budget():
    """vLLM's min_tokens: the engine holds off the end of sequence, the runtime the stop strings
    (engine/api_process/runtime.py)."""
    params = build_params(chat(max_tokens=20, min_tokens=12), **LIMITS)
    assert params.min_new_tokens == 12 and build_generation_config(params, [2]).min_new_tokens == 12
    with pytest.raises(APIError) as refused:
        build_params(chat(max_tokens=8, min_tokens=12), **LIMITS)
    assert refused.value.param == "min_tokens" and "(8)" in refused.value.message


def test_min_tokens_with_an_output_constraint_is_refused_as_ignore_eos_is():
    """A grammar ends with an end of sequence where its structure ends: held off, the output would go on free."""
    with pytest.raises(APIError) as refused:
        build_params(chat(max_tokens=20, min_tokens=4, response_format={"type": "json_object"}), **LIMITS)
    assert refused.value.param == "min_tokens"


KV = {**LIMITS, "max_context": 8192, "best_of_limit": 32, "max_n": 32, "kv_cache_tokens": 45_056}


def test_a_request_of_several_sequences_reserves_at_most_a_quarter_of_the_kv_cache():
    """best_of=20 with the longest max_tokens the cache took: another client got no token for 60 s."""
    beams = build_params(chat(best_of=20, n=1), **KV)  # max_tokens unset: cut to its share
    assert 20 * (10 + beams.max_new_tokens) <= 45_056 // 4 + 32 * 20
    with pytest.raises(APIError) as refused:
        build_params(chat(best_of=20, n=1, max_tokens=2000), **KV)
    assert refused.value.param == "best_of" and "(11264 of the server's 45056 tokens)" in refused.value.message
    with pytest.raises(APIError) as choices:
        build_params(chat(n=4, max_tokens=3000, temperature=1), **KV)
    assert choices.value.param == "n"
    assert build_params(chat(n=4, max_tokens=2000, temperature=1), **KV).max_new_tokens == 2000  # one context's worth
    assert build_params(chat(max_tokens=8000), **KV).max_new_tokens == 8000  # one sequence: the whole cache


def test_the_models_defaults_fill_what_a_request_leaves_unset():
    """The backend started every request from a blank configuration: temperature 1 over the whole vocabulary for a
    model whose makers ship temperature 0.7, top_p 0.8, top_k 20 (Qwen2.5's generation_config.json)."""
    qwen = GenerationDefaults(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05, max_new_tokens=30)
    params = build_params(chat(), **LIMITS, defaults=qwen)
    assert (params.temperature, params.top_p, params.top_k) == pytest.approx((0.7, 0.8, 20))
    assert params.repetition_penalty == pytest.approx(1.05) and params.max_new_tokens == 30 and params.do_sample
    own = build_params(chat(temperature=0, top_k=5, max_tokens=12), **LIMITS, defaults=qwen)
    assert (own.temperature, own.top_k, own.max_new_tokens, own.do_sample) == (0, 5, 12, False)
    assert build_params(chat(), **LIMITS, defaults=GenerationDefaults(max_new_tokens=500)).max_new_tokens == 90
