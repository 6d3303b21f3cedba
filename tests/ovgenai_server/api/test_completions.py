"""Text completions on the fake model, without HTTP: the choices of every prompt, echo, and the checks of a request's
prompts."""

from __future__ import annotations

import json

import pytest

from ovgenai_common.errors import APIError
from ovgenai_common.sse import DONE_FRAME
from ovgenai_server.api import completions
from ovgenai_server.api.protocol import CompletionRequest
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state, make_client, sse_payloads


async def test_n_choices_of_every_prompt_of_a_completion():
    state = fake_state()
    request = CompletionRequest(prompt=["one two", "three"], n=2, max_tokens=2, temperature=1.0)
    reply = await completions.answer(request, await completions.prepare(state, request), state.metrics)
    assert [choice["index"] for choice in reply["choices"]] == [0, 1, 2, 3]
    assert {choice["text"] for choice in reply["choices"]} == {"Hello,"}
    assert {choice["finish_reason"] for choice in reply["choices"]} == {"length"}
    assert reply["usage"]["prompt_tokens"] == 3  # two words, then one


async def test_an_echo_shows_the_prompt_as_sent_or_its_ids_decoded():
    state = fake_state()
    for prompt, shown in (("one two", "one two"), ([3, 1], "xxx x")):
        request = CompletionRequest(prompt=prompt, echo=True, max_tokens=1)
        reply = await completions.answer(request, await completions.prepare(state, request), state.metrics)
        assert reply["choices"][0]["text"] == shown + "Hello"


@pytest.mark.parametrize(("fields", "param"), [({"prompt": []}, "prompt"), ({"prompt": "x", "suffix": "y"}, "suffix"),
                                               ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
                                               ({"prompt": [5000]}, "prompt")])
async def test_what_a_completion_cannot_be_served_with_is_refused_naming_it(fields, param):
    with pytest.raises(APIError) as refused:
        await completions.prepare(fake_state(), CompletionRequest(**fields))
    assert refused.value.status == 400 and refused.value.param == param


async def test_echo_with_logprobs_needs_a_model_without_prefix_caching():
    request = CompletionRequest(prompt="one", echo=True, logprobs=0, max_tokens=1)
    with pytest.raises(APIError) as refused:
        await completions.prepare(fake_state(fake_model(prefix_caching=True)), request)
    assert refused.value.param == "echo"
    [prep] = await completions.prepare(fake_state(), request)
    assert prep.params.echo


async def test_the_stop_string_a_completion_ended_at_is_named_as_vllm_names_it():
    runtime = FakeRuntime(pieces=["Hello"])
    runtime.stop_reason = "\n"  # as the engine's runtime says where it cut the text (engine/api_process/stop_text.py)
    state = fake_state(fake_model(runtime))
    request = CompletionRequest(prompt="one", max_tokens=4, stop=["\n"])
    reply = await completions.answer(request, await completions.prepare(state, request), state.metrics)
    assert reply["choices"][0]["stop_reason"] == "\n"
    streamed = CompletionRequest(prompt="one", max_tokens=4, stop=["\n"], stream=True)
    [prep] = await completions.prepare(state, streamed)
    frames = [frame async for frame in completions.streamed(streamed, prep, state.metrics)]
    chunks = [json.loads(frame.removeprefix(b"data: ")) for frame in frames if frame != DONE_FRAME]
    assert [chunk["choices"][0].get("stop_reason", "absent") for chunk in chunks] == ["absent", "\n"]


@pytest.mark.parametrize("prompt", [[-6038], [1000], [[1], [2**64]]])
async def test_token_ids_outside_the_vocabulary_never_reach_the_engine(prompt):
    engine = FakeRuntime()
    async with make_client(engine) as client:
        response = await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 2})
    assert response.status_code == 400 and response.json()["error"]["param"] == "prompt"
    assert engine.calls == []


async def test_a_completion_stream_carries_every_tokens_log_probability_as_the_unary_answer_does():
    request = {"prompt": "a", "logprobs": 0, "max_tokens": 20}
    async with make_client(FakeRuntime(["Hello", "", " world", ""])) as client:
        unary = (await client.post("/v1/completions", json=request)).json()
        streamed = await client.post("/v1/completions", json={**request, "stream": True})
    chunks = [json.loads(payload)["choices"][0] for payload in sse_payloads(streamed.text)[:-1]]
    logprobs = [value for chunk in chunks for value in (chunk["logprobs"] or {}).get("token_logprobs", [])]
    assert logprobs == unary["choices"][0]["logprobs"]["token_logprobs"] == [-0.5] * 4
    assert "".join(chunk["text"] for chunk in chunks) == unary["choices"][0]["text"] == "Hello world"


async def test_completion_stream_rejects_several_prompts():
    async with make_client(FakeRuntime()) as client:
        response = await client.post("/v1/completions", json={"prompt": ["a", "b"], "stream": True})
    assert response.status_code == 400
