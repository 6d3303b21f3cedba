"""One LLM-API request (torchserve/requests.py), on a fake engine: its input from a form or gRPC's map of bytes, its
Hugging Face parameters checked and mapped onto the backend's (greedy unless do_sample), refusals in this API's own
names (text, max_new_tokens), MAX_INPUT_TOKENS and MAX_NEW_TOKENS, and the text streamed back with the end token
unless max_response_size cut it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.models.registry import ModelRegistry
from ovgenai_server.torchserve.requests import from_bytes, generate, input_value, ping_status, prepare
from ovgenai_server.torchserve.settings import TorchServeSettings
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state

EOS = "<|endoftext|>"


async def prepared(payload, runtime: FakeRuntime | None = None, **values):
    state = fake_state(fake_model(runtime))
    return await prepare(state, TorchServeSettings(**values), "fake-model", payload)


def test_a_parameter_is_json_where_it_parses_and_the_prompt_stays_text():
    assert input_value("text", "[1, 2]") == "[1, 2]"
    assert (input_value("top_k", "5"), input_value("stop", '["a", "b"]'), input_value("stop", "END")) == (
        5, ["a", "b"], "END")
    with pytest.raises(APIError) as refused:
        input_value("stop", "[" * 1000)
    assert refused.value.param == "stop"


def test_a_parameter_s_lone_surrogate_never_reaches_the_tokenizer():
    """A form field or gRPC input parsed as JSON follows the body's rules: "\\ud800" decoded to a lone surrogate, which
    reached the engine (a 200 with an empty body, UnicodeEncodeError in the API process)."""
    with pytest.raises(APIError) as refused:
        input_value("stop", '["\\ud800"]')
    assert refused.value.status == 400 and refused.value.param == "stop"


def test_a_grpc_value_that_is_not_utf8_is_refused_naming_it():
    with pytest.raises(APIError) as refused:
        from_bytes({"text": b"hi", "stop": b"\xff"})
    assert refused.value.param == "stop" and "UTF-8" in refused.value.message


def test_healthy_once_every_served_model_is_ready():
    ready, loading = FakeRuntime(), FakeRuntime(state=EngineState.LOADING)
    assert ping_status(fake_state(fake_model(ready))) == "Healthy"
    assert ping_status(fake_state(fake_model(ready), fake_model(loading, name="other"))) == "Unhealthy"
    assert ping_status(replace(fake_state(), models=ModelRegistry())) == "Unhealthy"  # none loaded yet


async def test_greedy_unless_do_sample_as_hugging_faces_generate():
    greedy = await prepared({"text": "hi", "temperature": 0.7, "do_sample": False})
    sampled = await prepared({"text": "hi", "do_sample": True})
    told = await prepared({"text": "hi", "temperature": 0.5})
    assert (greedy.params.do_sample, sampled.params.do_sample, sampled.params.temperature) == (False, True, 1.0)
    assert (await prepared({"text": "hi"})).params.do_sample is False
    assert told.params.do_sample and told.params.temperature == pytest.approx(0.5)


async def test_the_parameters_reach_the_engine_under_the_backends_names():
    prep = await prepared({"text": "hi", "max_new_tokens": 3, "top_k": 4, "repetition_penalty": 1.2, "stop": ["x"],
                           "seed": 9, "do_sample": True})
    params = prep.params
    assert (params.max_new_tokens, params.top_k, params.stop, params.seed) == (3, 4, ("x",), 9)
    assert params.repetition_penalty == pytest.approx(1.2)


async def test_without_max_new_tokens_the_output_is_capped_at_max_new_tokens_setting():
    assert (await prepared({"text": "hi"}, max_new_tokens=5)).params.max_new_tokens == 5


@pytest.mark.parametrize(("payload", "param", "said"), [
    ({"text": "hi", "inputs_embeds": [[0.1]]}, "inputs_embeds", "not supported"),
    ({"text": ""}, "text", "non-empty 'text'"),
    ({"prompt": "hi"}, "text", "non-empty 'text'"),
    ({"text": "hi", "top_n": 1, "beams": 2}, "beams", "Unknown input keys: beams, top_n."),
    ({"text": "hi", "do_sample": "yes"}, "do_sample", "true or false"),
    ({"text": "hi", "max_new_tokens": 9000}, "max_new_tokens", "exceeds MAX_NEW_TOKENS (2048)"),
    ({"text": "hi", "max_new_tokens": -1}, "max_new_tokens", "'max_new_tokens'"),
    ({"text": "hi", "temperature": "hot"}, "temperature", "'temperature'"),
])
async def test_what_cannot_be_served_is_a_400_in_this_apis_names(payload, param, said):
    with pytest.raises(APIError) as refused:
        await prepared(payload)
    assert refused.value.kind is ErrorKind.INVALID_REQUEST
    assert refused.value.param == param and said in refused.value.message, refused.value.message


async def test_a_prompt_past_max_input_tokens_is_refused_with_that_reason():
    with pytest.raises(APIError) as refused:
        await prepared({"text": "one two three"}, max_input_tokens=2)
    assert refused.value.param == "text" and "MAX_INPUT_TOKENS is 2" in refused.value.message
    # Past the model's context too (the fake's is 64 tokens): the limit the client set is still the reason given.
    with pytest.raises(APIError) as refused:
        await prepared({"text": "word " * 100}, max_input_tokens=50)
    assert "The input has 100 tokens; MAX_INPUT_TOKENS is 50." in refused.value.message


async def test_the_backends_refusal_names_this_apis_fields():
    """The fake model's context is 64 tokens (a word each)."""
    with pytest.raises(APIError) as refused:
        await prepared({"text": "word " * 60, "max_new_tokens": 10})
    assert refused.value.param == "max_new_tokens" and refused.value.message.startswith("max_new_tokens (10) plus")
    assert "max_tokens" not in refused.value.message
    with pytest.raises(APIError) as refused:
        await prepared({"text": "word " * 70})
    assert refused.value.param == "text" and "70 tokens" in refused.value.message


async def test_a_model_not_served_is_a_404():
    with pytest.raises(APIError) as refused:
        await prepare(fake_state(), TorchServeSettings(), "other", {"text": "hi"})
    assert refused.value.kind is ErrorKind.NOT_FOUND


async def test_the_text_streams_then_the_end_token():
    state = fake_state()
    settings = TorchServeSettings()
    prep = await prepare(state, settings, "fake-model", {"text": "hi"})
    assert [text async for text in generate(state, settings, prep)] == ["Hello", ",", " world", EOS]


async def test_a_response_past_max_response_size_ends_without_the_end_token():
    runtime = FakeRuntime(pieces=["x" * 600] * 3)
    state = fake_state(fake_model(runtime))
    settings = TorchServeSettings(max_response_size=1024)
    prep = await prepare(state, settings, "fake-model", {"text": "hi"})
    assert [text async for text in generate(state, settings, prep)] == ["x" * 600]
    assert runtime.active == 0  # its generation ended with it


def test_grpc_input_values_are_text_or_json():
    assert from_bytes({"text": b"42", "max_new_tokens": b"42", "do_sample": b"true", "stop": b"END"}) == {
        "text": "42", "max_new_tokens": 42, "do_sample": True, "stop": "END"}


def test_a_models_own_response_timeout_wins(tmp_path):
    from ovgenai_server.torchserve.requests import response_timeout

    settings = TorchServeSettings(default_response_timeout=120)
    (tmp_path / "model-config.yaml").write_text("minWorkers: 1\nresponseTimeout: 7\n")
    assert response_timeout(tmp_path, settings) == 7
    assert response_timeout(tmp_path / "other", settings) == 120
    assert response_timeout(None, settings) == 120  # a model without a folder of its own
