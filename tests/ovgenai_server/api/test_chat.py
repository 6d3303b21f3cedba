"""Chat completions on the fake model, without HTTP: what an answer holds, what the metrics count, and that closing a
stream ends its generation."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client import CollectorRegistry

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.api import chat
from ovgenai_server.api.protocol import ChatCompletionRequest
from ovgenai_server.app import create_app
from ovgenai_server.engine.contract.types import RequestOutput, SequenceDelta
from ovgenai_server.settings import BackendSettings
from tests.support.fake_engine import FACTS, FakeRuntime, fake_model, fake_state, make_client, sse_payloads

MESSAGES = [{"role": "user", "content": "hi there"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


class UnfinishedChoiceRuntime(FakeRuntime):
    """Ends a two-choice request whose choice 1 finished with a reason, choice 0 without one (a sequence the engine
    ended in a step that gave it no new token)."""

    async def generate(self, prompt, params):  # noqa: ARG002
        yield RequestOutput([SequenceDelta(0, "Let me", 1), SequenceDelta(1, "Done.", 1, "stop")], False, 1)
        yield RequestOutput([SequenceDelta(0, " check.\n", 1)], True, 1)



def counted(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {"model_name": "fake-model", **labels}) or 0.0


async def test_a_chat_answer_with_its_usage_and_counters():
    registry = CollectorRegistry()
    state = fake_state(metrics=registry)
    request = ChatCompletionRequest(messages=MESSAGES, max_tokens=10)
    reply = await chat.answer(request, await chat.prepare(state, request), state.metrics)
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Hello, world"}
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] == 3
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + 3
    assert counted(registry, "ovgenai:generation_tokens_total") == 3
    assert counted(registry, "ovgenai:request_success_total", finished_reason="stop") == 1


async def test_an_engine_failure_is_an_error_and_counted():
    runtime, registry = FakeRuntime(fail_after=1), CollectorRegistry()
    state = fake_state(fake_model(runtime), metrics=registry)
    request = ChatCompletionRequest(messages=MESSAGES)
    with pytest.raises(APIError) as raised:
        await chat.answer(request, await chat.prepare(state, request), state.metrics)
    assert raised.value.kind is ErrorKind.UNAVAILABLE and "retry" in raised.value.message
    assert counted(registry, "ovgenai:request_failure_total") == 1 and runtime.active == 0


async def test_closing_a_stream_ends_its_generation():
    runtime = FakeRuntime(pieces=["a"] * 20)
    state = fake_state(fake_model(runtime))
    request = ChatCompletionRequest(messages=MESSAGES, stream=True)
    stream = chat.streamed(request, await chat.prepare(state, request), state.metrics)
    first = await anext(stream)
    assert first.startswith(b"data: ") and runtime.active == 1
    await stream.aclose()  # what the router does when the client leaves: the generation is aborted
    assert runtime.active == 0


async def test_tools_on_a_template_without_them_are_described_and_the_answer_held_to_their_form():
    """As llama.cpp's generic format: the tools in the system message, the answer JSON calls or a response."""
    runtime = FakeRuntime(pieces=['{"tool_calls": [{"name": "f", "parameters": {}}]}'])
    state = fake_state(fake_model(runtime, max_context=4096))
    request = ChatCompletionRequest(messages=MESSAGES, tools=[{"type": "function", "function": {"name": "f"}}])
    prep = await chat.prepare(state, request)
    [(prompt_ids, params)] = [(prep.prompt_ids, prep.params)]
    assert params.structured_output.param == "tools" and '"response"' in params.structured_output.value
    reply = await chat.answer(request, prep, state.metrics)
    message = reply["choices"][0]["message"]
    assert message["content"] is None and message["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    assert reply["choices"][0]["finish_reason"] == "tool_calls" and len(prompt_ids) > 20  # the description


async def test_chat_stream_contract():
    async with make_client(FakeRuntime()) as client:
        response = await client.post("/v1/chat/completions", json={
            "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}})
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Hello"}  # role with the first text
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:] if c["choices"])
    final = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(final) == 1 and final[0]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "Hello, world"


async def test_no_chunk_before_the_first_token_and_each_choice_opens_with_the_role():
    """Benchmark clients time the first token from the first chunk with choices: it must carry generated text."""
    events: list = []
    app = create_app(BackendSettings(), [fake_model(FakeRuntime(events=events))])

    async def recording(scope, receive, send):
        async def record(message):
            if message["type"] == "http.response.body" and b'"choices"' in message.get("body", b""):
                events.append(json.loads(message["body"].decode().split("data: ", 1)[1]))
            await send(message)

        await app(scope, receive, record)

    transport = httpx.ASGITransport(app=recording)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "stream": True, "n": 2,
                                                                   "temperature": 1.0})
    assert response.status_code == 200
    assert events[0] == "token"  # nothing was sent before the engine produced the first token
    chunks = [e for e in events if e != "token"]
    for index in (0, 1):
        mine = [c["choices"][0]["delta"] for c in chunks if c["choices"][0]["index"] == index]
        assert mine[0] == {"role": "assistant", "content": "Hello"}
        assert all("role" not in delta for delta in mine[1:])


async def test_a_choice_without_text_still_opens_with_the_role():
    async with make_client(FakeRuntime(pieces=[""])) as client:
        response = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "stream": True})
    chunks = [json.loads(p) for p in sse_payloads(response.text)[:-1]]
    assert [c["choices"][0]["delta"] for c in chunks] == [{"role": "assistant", "content": ""}, {}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_mid_stream_engine_failure_sends_error_event_then_done():
    async with make_client(FakeRuntime(fail_after=1)) as client:
        response = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "stream": True})
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    error = json.loads(payloads[-2])["error"]
    assert error["type"] == ErrorKind.UNAVAILABLE.type and "retry" in error["message"]


async def test_n_choices_and_usage():
    async with make_client(FakeRuntime()) as client:
        body = (await client.post("/v1/chat/completions",
                                  json={"messages": MESSAGES, "n": 2, "temperature": 0.7})).json()
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert body["usage"]["completion_tokens"] == 6


async def test_length_finish_reason_from_max_tokens():
    engine = FakeRuntime()
    async with make_client(engine) as client:
        body = (await client.post("/v1/completions", json={"prompt": "a b", "max_tokens": 2})).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert engine.calls[0][1].max_new_tokens == 2


async def test_default_max_tokens_fills_the_context():
    engine = FakeRuntime()
    async with make_client(engine) as client:
        await client.post("/v1/completions", json={"prompt": "a b c"})
    assert engine.calls[0][1].max_new_tokens == FACTS.max_context - 3


async def test_sampling_parameters_reach_the_engine():
    engine = FakeRuntime()
    async with make_client(engine) as client:
        await client.post("/v1/chat/completions", json={
            "messages": MESSAGES, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7,
            "stop": "END", "presence_penalty": 0.1, "frequency_penalty": 0.2, "repetition_penalty": 1.1,
            "max_completion_tokens": 9, "ignore_eos": True})
    params = engine.calls[0][1]
    assert (params.temperature, params.top_p, params.top_k, params.min_p, params.seed) == (0.5, 0.9, 40, 0.05, 7)
    assert params.do_sample and params.stop == ("END",) and params.max_new_tokens == 9 and params.ignore_eos
    assert (params.presence_penalty, params.frequency_penalty, params.repetition_penalty) == (0.1, 0.2, 1.1)


async def test_tool_calls_are_parsed_from_output():
    output = ['<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>']
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    async with make_client(fake_model(FakeRuntime(output), tools=True)) as client:
        body = (await client.post("/v1/chat/completions", json={"messages": MESSAGES, "tools": [tool]})).json()
        streamed = await client.post("/v1/chat/completions",
                                     json={"messages": MESSAGES, "tools": [tool], "stream": True})
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    chunks = [json.loads(p) for p in sse_payloads(streamed.text)[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-2]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "other"}}}, "tool_choice"),
        ({"tool_choice": {"type": "function"}}, "tool_choice"),
        ({"tools": [TOOL, TOOL]}, "tools"),  # two functions of one name
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]}, "tools"),
        ({"tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
        ({"tool_choice": "required", "n": 2, "temperature": 1}, "n"),  # one constrained sequence per request
        ({"tool_choice": "required", "guided_regex": "a+"}, "tool_choice"),
    ],
)
async def test_invalid_tool_requests_are_400_naming_the_parameter(body, param):
    async with make_client(fake_model(FakeRuntime(), tools=True)) as client:
        response = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "tools": [TOOL], **body})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


async def test_a_forced_call_is_a_grammar_checked_before_admission():
    engine = fake_model(FakeRuntime(['{"city": "Paris"}']), tools=True)
    named = {"type": "function", "function": {"name": "get_weather"}}
    async with make_client(engine) as client:
        body = (await client.post("/v1/chat/completions", json={
            "messages": MESSAGES, "tools": [TOOL], "tool_choice": named})).json()
        refusing = {"type": "function", "function": {"name": "f", "parameters": {"refuse": True}}}
        refused = await client.post("/v1/chat/completions", json={
            "messages": MESSAGES, "tools": [refusing], "tool_choice": "required"})
    structured = engine.runtime.calls[0][1].structured_output
    assert (structured.kind, json.loads(structured.value)) == ("json_schema", {"type": "object"})
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"  # a named function forced: OpenAI's "stop"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tool_choice"


async def test_reasoning_streams_apart_from_the_answer_with_its_logprobs():
    engine = fake_model(FakeRuntime(["<think>", "Two", " and two.", "</th", "ink>\n\n", "It is", " 4."]),
                        reasoning_parser="qwen3")
    request = {"messages": MESSAGES, "logprobs": True, "max_tokens": 20}
    async with make_client(engine) as client:
        unary = (await client.post("/v1/chat/completions", json=request)).json()
        streamed = await client.post("/v1/chat/completions", json={**request, "stream": True})
    message = unary["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("Two and two.", "It is 4.")
    deltas = [c["choices"][0] for c in map(json.loads, sse_payloads(streamed.text)[:-1])]
    assert "".join(d["delta"].get("reasoning_content", "") for d in deltas) == "Two and two."
    assert "".join(d["delta"].get("content", "") for d in deltas) == "It is 4."
    assert deltas[0]["delta"]["role"] == "assistant"
    # Each token's log probability goes out once, with the first part it produced (held back while a tag forms).
    assert sum(len((d["logprobs"] or {}).get("content", [])) for d in deltas) == 7
    assert len(unary["choices"][0]["logprobs"]["content"]) == 7


def streamed_logprobs(text: str) -> dict[int, int]:
    """How many token log probabilities a chat stream carried, per choice."""
    counts: dict[int, int] = {}
    for chunk in map(json.loads, sse_payloads(text)[:-1]):
        for choice in chunk["choices"]:
            carried = len((choice["logprobs"] or {}).get("content", []))
            counts[choice["index"]] = counts.get(choice["index"], 0) + carried
    return counts


@pytest.mark.parametrize(
    ("pieces", "reasoning", "tools"),
    [
        (["Hello", "", " world", ""], None, False),  # tokens without text of their own: a split character, the end
        (["Hello", "", " world", ""], None, True),
        (["<think>", "Two.", "</think>"], "qwen3", False),  # the closing tag is the last token: nothing follows it
        (['<tool_call>{"name": "f", "arguments": {}}</tool_call>', "\n"], None, True),  # a blank line after a call
    ],
)
async def test_a_stream_carries_every_tokens_log_probability_as_the_unary_answer_does(pieces, reasoning, tools):
    engine = fake_model(FakeRuntime(pieces), tools=True, reasoning_parser=reasoning)
    request = {"messages": MESSAGES, "logprobs": True, "max_tokens": 20, "n": 2, "temperature": 1,
               **({"tools": [TOOL]} if tools else {})}
    async with make_client(engine) as client:
        unary = (await client.post("/v1/chat/completions", json=request)).json()
        streamed = await client.post("/v1/chat/completions", json={**request, "stream": True})
    assert [len(choice["logprobs"]["content"]) for choice in unary["choices"]] == [len(pieces)] * 2
    assert streamed_logprobs(streamed.text) == {0: len(pieces), 1: len(pieces)}


@pytest.mark.parametrize("tools", [False, True])
async def test_a_choice_the_engine_ends_without_a_reason_is_closed_once_with_all_its_text(tools):
    request = {"messages": MESSAGES, "n": 2, "temperature": 1, "stream": True, **({"tools": [TOOL]} if tools else {})}
    async with make_client(fake_model(UnfinishedChoiceRuntime(), tools=True)) as client:
        streamed = await client.post("/v1/chat/completions", json=request)
    content: dict[int, str] = {0: "", 1: ""}
    finishes: dict[int, list[str]] = {0: [], 1: []}
    for chunk in map(json.loads, sse_payloads(streamed.text)[:-1]):
        for choice in chunk["choices"]:
            content[choice["index"]] += choice["delta"].get("content") or ""
            finishes[choice["index"]] += [choice["finish_reason"]] if choice["finish_reason"] else []
    assert finishes == {0: ["stop"], 1: ["stop"]}
    assert content[0].rstrip() == "Let me check." and content[1] == "Done."


async def test_chat_template_kwargs_reach_the_template():
    engine = FakeRuntime()
    async with make_client(engine) as client:
        plain = (await client.post("/tokenize", json={"messages": MESSAGES})).json()
        thinking = (await client.post("/tokenize", json={
            "messages": MESSAGES, "chat_template_kwargs": {"enable_thinking": False}})).json()
        chat = await client.post("/v1/chat/completions", json={
            "messages": MESSAGES, "chat_template_kwargs": {"enable_thinking": False}})
    assert thinking["count"] == plain["count"] + 1  # the fake template writes each variable as one more word
    assert chat.status_code == 200 and len(engine.calls[0][0]) == thinking["count"]


async def test_logprobs_shape():
    async with make_client(FakeRuntime()) as client:
        body = (await client.post("/v1/chat/completions", json={"messages": MESSAGES, "logprobs": True})).json()
        completion = (await client.post("/v1/completions", json={"prompt": "a", "logprobs": 0})).json()
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == 3 and content[0]["logprob"] == -0.5
    assert completion["choices"][0]["logprobs"]["token_logprobs"] == [-0.5, -0.5, -0.5]


async def test_one_alternative_is_the_chosen_token_unary_and_streamed():
    """lm-evaluation-harness's `logprobs: 1` (and chat's `top_logprobs: 1`), as OVMS answers them."""
    async with make_client(FakeRuntime()) as client:
        chat = (await client.post("/v1/chat/completions", json={"messages": MESSAGES, "logprobs": True,
                                                                "top_logprobs": 1})).json()
        completion = (await client.post("/v1/completions", json={"prompt": "a", "logprobs": 1})).json()
        streamed = await client.post("/v1/completions", json={"prompt": "a", "logprobs": 1, "stream": True})
        refused = await client.post("/v1/completions", json={"prompt": "a", "logprobs": 2})
    entry = chat["choices"][0]["logprobs"]["content"][0]
    assert entry["top_logprobs"] == [{"token": entry["token"], "logprob": -0.5, "bytes": entry["bytes"]}]
    tokens = completion["choices"][0]["logprobs"]["tokens"]
    assert completion["choices"][0]["logprobs"]["top_logprobs"] == [{token: -0.5} for token in tokens]
    chunks = [json.loads(p) for p in sse_payloads(streamed.text)[:-1]]
    assert [top for c in chunks if c["choices"][0]["logprobs"] for top in c["choices"][0]["logprobs"]["top_logprobs"]
            ] == [{token: -0.5} for token in tokens]
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "logprobs"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
        ({"messages": MESSAGES, "temperature": 3}, "temperature"),
        ({"messages": MESSAGES, "n": 2, "temperature": 0}, "n"),  # greedy n > 1
        ({"messages": MESSAGES, "best_of": 5}, "best_of"),
        ({"messages": MESSAGES, "max_tokens": 0}, "max_tokens"),
        ({"messages": MESSAGES, "stop": ["a", ""]}, "stop"),
        ({"messages": MESSAGES, "response_format": {"type": "json_schema", "json_schema": {}}}, "response_format"),
        ({"messages": MESSAGES, "tools": [{"type": "function"}]}, "tools"),
        ({"messages": MESSAGES, "frobnicate": 1}, "frobnicate"),
        ({"messages": MESSAGES, "tool_choice": "required"}, "tool_choice"),  # nothing to call
        ({"messages": MESSAGES, "chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
        ({"messages": MESSAGES, "chat_template_kwargs": {"add_generation_prompt": "no"}}, "chat_template_kwargs"),
    ],
)
async def test_invalid_chat_requests_are_400_naming_the_parameter(body, param):
    async with make_client(FakeRuntime()) as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


async def test_newer_openai_fields_are_honoured_or_accepted_as_openai_and_vllm_take_them():
    """reasoning_effort, verbosity, safety_identifier, prompt_cache_key and modalities were 400s: LiteLLM's users
    needed drop_params. reasoning_effort is the template's thinking switch; logit_bias, which the engine cannot do, is
    a 400 saying so."""
    engine = FakeRuntime()
    async with make_client(engine) as client:
        plain = (await client.post("/tokenize", json={"messages": MESSAGES})).json()
        accepted = await client.post("/v1/chat/completions", json={
            "messages": MESSAGES, "reasoning_effort": "none", "verbosity": "low", "safety_identifier": "u-1",
            "prompt_cache_key": "k", "modalities": ["text"], "logit_bias": {}})
        audio = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "modalities": ["audio"]})
        bias = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "logit_bias": {"42": -100}})
    assert accepted.status_code == 200, accepted.text
    assert len(engine.calls[0][0]) == plain["count"] + 1  # enable_thinking false reached the template
    assert audio.status_code == 400 and audio.json()["error"]["param"].startswith("modalities")
    assert bias.status_code == 400 and bias.json()["error"]["param"] == "logit_bias"
    assert "logits processor" in bias.json()["error"]["message"]
