"""Tools on the default model, whose chat template has no tool syntax: described in its system message (llama.cpp's
generic form), its answer held by a grammar to calls or a response; read by the official `openai` client and
LangChain. A 135M model chooses poorly, so what is checked is the protocol: every answer is a call to a declared tool
with JSON arguments, or text; forced calls are calls; a result goes back and is answered."""

from __future__ import annotations

import json

import httpx

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                   "required": ["city"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                   "required": ["zone"], "additionalProperties": False}}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def assert_call(call, tools=(WEATHER, TIME)) -> dict:
    names = {tool["function"]["name"] for tool in tools}
    assert call.type == "function" and call.id.startswith("call_") and call.function.name in names
    arguments = json.loads(call.function.arguments)
    assert isinstance(arguments, dict)
    return arguments


def test_auto_answers_with_a_call_or_text_never_both(client, default_model):
    for question in ("What is the weather in Paris?", "Say hello."):
        reply = client.chat.completions.create(model=default_model, tools=[WEATHER, TIME], temperature=0,
                                               messages=[{"role": "user", "content": question}], max_tokens=120)
        choice = reply.choices[0]
        if choice.message.tool_calls:
            assert choice.finish_reason == "tool_calls" and choice.message.content is None
            for call in choice.message.tool_calls:
                assert_call(call)
        else:
            assert choice.finish_reason in ("stop", "length") and choice.message.content


def test_required_calls_and_the_result_goes_back(client, default_model):
    reply = client.chat.completions.create(model=default_model, messages=QUESTION, tools=[WEATHER, TIME],
                                           tool_choice="required", parallel_tool_calls=False, temperature=0,
                                           max_tokens=100)
    [call] = reply.choices[0].message.tool_calls
    assert_call(call)
    follow_up = [*QUESTION, reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}]
    answer = client.chat.completions.create(model=default_model, messages=follow_up, tools=[WEATHER, TIME],
                                            temperature=0, max_tokens=40)
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_a_named_function_streams_with_its_id_first(client, default_model):
    stream = client.chat.completions.create(model=default_model, messages=QUESTION, tools=[WEATHER, TIME],
                                            tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                            temperature=0, max_tokens=60, stream=True)
    pieces = [delta.tool_calls[0] for chunk in stream if chunk.choices
              for delta in [chunk.choices[0].delta] if delta.tool_calls]
    assert pieces[0].id.startswith("call_") and pieces[0].function.name == "get_weather"
    assert all(piece.id is None for piece in pieces[1:])
    assert "city" in json.loads("".join(piece.function.arguments for piece in pieces))


def test_langchain_bind_tools_on_a_template_without_tool_syntax(backend, default_model):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        return f"Sunny in {city}"

    llm = ChatOpenAI(base_url=backend.url + "/v1", api_key="unused", model=default_model, temperature=0,
                     max_tokens=80)
    message = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("Weather in Paris?")
    [call] = message.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"], dict)


def test_tokenize_counts_the_tools_description(backend, default_model):
    plain = httpx.post(backend.url + "/tokenize", json={"model": default_model, "messages": QUESTION}).json()
    with_tools = httpx.post(backend.url + "/tokenize", json={"model": default_model, "messages": QUESTION,
                                                            "tools": [WEATHER]}).json()
    assert with_tools["count"] > plain["count"] + 20
