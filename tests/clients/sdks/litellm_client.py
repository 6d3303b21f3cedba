"""LiteLLM against the backend as an OpenAI-compatible server (`openai/<model>`), without drop_params: the fields it
passes on (reasoning_effort, seed, ...) are taken, unary and streamed, and a forced tool call comes back parsed."""

from __future__ import annotations

import json
import os

import litellm

BASE, MODEL = os.environ["CLIENT_SUITE_BASE_URL"], os.environ["CLIENT_SUITE_MODEL"]
ASK = [{"role": "user", "content": "Name a colour."}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def complete(**fields):
    return litellm.completion(model=f"openai/{MODEL}", api_base=BASE, api_key="unused",
                              **{"max_tokens": 8, "temperature": 0, **fields})


def test_the_fields_litellm_sends_need_no_drop_params():
    reply = complete(messages=ASK, reasoning_effort="low", seed=7, user="someone", stop=["\n\n"])
    assert reply.choices[0].message.content and reply.usage.completion_tokens > 0


def test_a_streamed_answer_arrives_in_pieces():
    pieces = [chunk.choices[0].delta.content or "" for chunk in complete(messages=ASK, stream=True)]
    assert len(pieces) > 1 and "".join(pieces).strip()


def test_a_forced_tool_call_comes_back_parsed():
    reply = complete(messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=[WEATHER],
                     tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=48)
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and isinstance(json.loads(call.function.arguments)["city"], str)
    assert reply.choices[0].finish_reason == "tool_calls"
