"""Tool calls and reasoning on the real engine, read by the official `openai` client and LangChain.

The default model, served with a Qwen3-style chat template (tools in `<tool_call>` blocks, and `<think>` opened by
the template unless `enable_thinking` is false) and the parsers named on the command line, as a user serves a
thinking model: `--tool_parser hermes3 --reasoning_parser qwen3`. A 135M model rarely calls a tool by itself, so the
tests make the engine produce what they read: tool_choice "required" and a named function force a call by grammar
(the feature under test), and a regular expression (structured output) stands in for a model that thinks or writes a
`<tool_call>` block on its own. What the server returns is checked against the raw text the same engine generates
for the same prompt through /v1/completions, where nothing is parsed."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from tests.support.servers import MODELS, TEST_KV_CACHE, RemoteServer

NAME = "smol-thinking"
TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}<|im_start|>user
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls %}{% for call in message.tool_calls %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}"""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                   "required": ["city"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                   "required": ["zone"], "additionalProperties": False}}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
# Text the model writes as a thinking model would (the regex stands in for its training).
THINKING = r"[A-Za-z ]{4,30}\.\n</think>\n\n[A-Za-z ]{4,30}\."
CALLING = (r"Let me check\.\n<tool_call>\n\{\"name\": \"get_weather\", \"arguments\": \{\"city\": \"(Paris|Rome)\"\}\}"
           r"\n</tool_call>")


@pytest.fixture(scope="module")
def server(tmp_path_factory, default_model):
    folder = tmp_path_factory.mktemp("thinking")
    for path in (MODELS / default_model).iterdir():
        if path.name.startswith("openvino_") or path.suffix == ".json":
            (folder / path.name).symlink_to(path)
    (folder / "template.jinja").write_text(TEMPLATE)
    args = ["--model", str(folder), "--served_model_name", NAME, "--tool_parser", "hermes3",
            "--reasoning_parser", "qwen3", "--max_tokens_limit", "2048"]
    with RemoteServer("ovgenai_server", args, env=TEST_KV_CACHE) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    return server.openai_client()


def raw_text(server, messages: list, extra: dict, **fields) -> str:
    """What the engine generates for the chat's prompt, unparsed: the same prompt tokens through /v1/completions."""
    tokens = httpx.post(f"{server.url}/tokenize", json={"model": NAME, "messages": messages, **extra}).json()["tokens"]
    reply = httpx.post(f"{server.url}/v1/completions", timeout=120,
                       json={"model": NAME, "prompt": tokens, "temperature": 0, **fields})
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["text"]


def streamed(client, **request) -> tuple[dict, list[str]]:
    """The message a stream's deltas make (content, reasoning_content, tool_calls by index) and its finish reasons."""
    message: dict = {"content": "", "reasoning_content": "", "tool_calls": {}}
    reasons = []
    for chunk in client.chat.completions.create(model=NAME, stream=True, **request):
        for choice in chunk.choices:
            delta = choice.delta.model_dump()
            message["content"] += delta.get("content") or ""
            message["reasoning_content"] += (delta.get("model_extra") or delta).get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                whole = message["tool_calls"].setdefault(call["index"], {"id": call["id"], "name": "", "arguments": ""})
                whole["name"] += call["function"].get("name") or ""
                whole["arguments"] += call["function"].get("arguments") or ""
            reasons += [choice.finish_reason] if choice.finish_reason else []
    return message, reasons


def test_required_forces_a_call_the_sdk_reads_and_the_result_goes_back(client):
    reply = client.chat.completions.create(model=NAME, messages=QUESTION, tools=[WEATHER, TIME],
                                           tool_choice="required", temperature=0, max_tokens=80)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    [call] = choice.message.tool_calls[:1]
    assert call.id.startswith("call_") and call.type == "function"
    arguments = json.loads(call.function.arguments)
    assert call.function.name in ("get_weather", "get_time") and isinstance(arguments, dict)
    assert set(arguments) == ({"city"} if call.function.name == "get_weather" else {"zone"})
    # The tool's result goes back and the model answers (without thinking, so the answer is content).
    follow_up = [*QUESTION, choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": '{"weather": "sunny, 21 C"}'}]
    answer = client.chat.completions.create(model=NAME, messages=follow_up, tools=[WEATHER, TIME], temperature=0,
                                            max_tokens=16, extra_body=NO_THINKING)
    assert answer.choices[0].message.content and answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.model_extra["reasoning_content"] is None  # nothing was thought


class Place(BaseModel):
    city: str = Field(max_length=20)


class GetForecast(BaseModel):
    """The weather in a place for the next days."""

    place: Place
    days: int = Field(ge=1, le=7)


def test_required_calls_a_tool_whose_parameters_nest_definitions(client):
    """The openai SDK writes a pydantic model's nested models under `$defs`, referred to from its root."""
    tool = openai.pydantic_function_tool(GetForecast)
    assert "$defs" in tool["function"]["parameters"]
    request = {"messages": QUESTION, "tools": [tool], "tool_choice": "required", "temperature": 0, "max_tokens": 120}
    choice = client.chat.completions.create(model=NAME, **request).choices[0]
    assert choice.finish_reason == "tool_calls", choice
    for call in choice.message.tool_calls:
        assert call.function.name == "GetForecast"
        GetForecast.model_validate_json(call.function.arguments)  # the nested model's schema was followed
    message, reasons = streamed(client, **request)
    assert reasons == ["tool_calls"]
    assert [(c["name"], c["arguments"]) for c in message["tool_calls"].values()] == [
        (call.function.name, call.function.arguments) for call in choice.message.tool_calls]


def test_a_named_function_is_called_and_streams_as_it_is_written(client):
    named = {"type": "function", "function": {"name": "get_weather"}}
    request = {"messages": QUESTION, "tools": [WEATHER, TIME], "tool_choice": named, "temperature": 0,
               "max_tokens": 40}
    unary = client.chat.completions.create(model=NAME, **request).choices[0]
    message, reasons = streamed(client, **request)
    [call] = unary.message.tool_calls
    assert call.function.name == "get_weather" and set(json.loads(call.function.arguments)) == {"city"}
    assert unary.finish_reason == reasons[0] == "stop"  # OpenAI's reason when the caller named the function
    [whole] = message["tool_calls"].values()
    assert (whole["name"], whole["arguments"]) == ("get_weather", call.function.arguments)


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "now"}}])
def test_a_function_without_parameters_is_called_with_none(client, tool_choice):
    """Its parameters were "any object": 200 tokens of nested JSON and no call, or arguments the model made up."""
    now = {"type": "function", "function": {"name": "now", "description": "The current time."}}
    choice = client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": "What time is it now?"}], tools=[now],
        tool_choice=tool_choice, temperature=0, max_tokens=60).choices[0]
    [call] = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("now", {})


def test_parameters_that_are_not_an_object_are_refused(client):
    """OpenAI refuses them: a call's arguments are a JSON object."""
    shout = {"type": "function", "function": {"name": "shout", "parameters": {"type": "string"}}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=NAME, messages=QUESTION, tools=[shout], max_tokens=4)
    assert refused.value.body["param"] == "tools" and "object" in refused.value.body["message"]


def test_a_call_sent_back_is_rendered_with_its_arguments_as_an_object(server):
    """Templates write `arguments | tojson`, expecting an object (Hugging Face's convention): the JSON text OpenAI's
    clients send is written as that object. Calls are checked as OpenAI checks them: `[{"foo": 1}]` was taken, and
    arguments sent as an object were written as Python's repr."""
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    messages = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}]
    ids = httpx.post(f"{server.url}/tokenize", json={"model": NAME, "messages": messages}).json()["tokens"]
    text = httpx.post(f"{server.url}/detokenize", json={"model": NAME, "tokens": ids}).json()["prompt"]
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in text, text
    for bad in ([{"foo": 1}], [{**call, "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]):
        refused = httpx.post(f"{server.url}/v1/chat/completions", json={
            "model": NAME, "messages": [*QUESTION, {"role": "assistant", "tool_calls": bad}]})
        assert refused.status_code == 400 and refused.json()["error"]["param"].startswith("messages.1.tool_calls.0")


def test_a_call_the_model_writes_in_its_format_is_parsed_as_it_streams(server, client):
    request = {"messages": QUESTION, "tools": [WEATHER], "temperature": 0, "max_tokens": 60,
               "extra_body": {**NO_THINKING, "guided_regex": CALLING}}
    raw = raw_text(server, QUESTION, {**NO_THINKING, "tools": [WEATHER]}, max_tokens=60, guided_regex=CALLING)
    assert "<tool_call>" in raw
    unary = client.chat.completions.create(model=NAME, **request).choices[0]
    assert unary.finish_reason == "tool_calls" and unary.message.content == "Let me check."
    [call] = unary.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == json.loads(raw.split("<tool_call>")[1].split("</tool_call>")[0])[
        "arguments"]
    message, reasons = streamed(client, **request)
    assert reasons == ["tool_calls"] and message["content"] == "Let me check."
    assert [(c["name"], c["arguments"]) for c in message["tool_calls"].values()] == [
        ("get_weather", call.function.arguments)]


def test_langchain_bind_tools_reads_the_call_and_sends_the_result(server):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        return f"sunny in {city}"

    chat = ChatOpenAI(base_url=server.url + "/v1", api_key="unused", model=NAME, temperature=0, max_tokens=40,
                      max_retries=0, extra_body=NO_THINKING)
    question = HumanMessage("What is the weather in Paris?")
    called = chat.bind_tools([get_weather], tool_choice="get_weather").invoke([question])
    [call] = called.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"].get("city"), str)
    result = ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])
    answer = chat.bind_tools([get_weather]).invoke([question, called, result])
    assert isinstance(answer.content, str) and answer.content


def test_reasoning_is_returned_apart_from_the_answer(server, client):
    request = {"messages": QUESTION, "temperature": 0, "max_tokens": 40, "extra_body": {"guided_regex": THINKING}}
    raw = raw_text(server, QUESTION, {}, max_tokens=40, guided_regex=THINKING)
    thought, answer = raw.split("</think>")
    unary = client.chat.completions.create(model=NAME, **request).choices[0]
    assert unary.message.model_extra["reasoning_content"] == thought
    assert unary.message.content == answer.lstrip() and re.fullmatch(r"[A-Za-z ]{4,30}\.", unary.message.content)
    message, reasons = streamed(client, **request)
    assert (message["reasoning_content"], message["content"]) == (thought, answer.lstrip())
    assert reasons == [unary.finish_reason] == ["stop"]


def test_enable_thinking_false_reaches_the_template(server, client):
    def prompt_tokens(extra: dict) -> int:
        return httpx.post(f"{server.url}/tokenize", json={"model": NAME, "messages": QUESTION, **extra}).json()["count"]

    assert prompt_tokens(NO_THINKING) > prompt_tokens({})  # the empty <think></think> block is in the prompt
    # OVMS's add_generation_prompt among the variables: no assistant turn opened (assistant prefill).
    assert prompt_tokens({"chat_template_kwargs": {"add_generation_prompt": False}}) < prompt_tokens({})
    reply = client.chat.completions.create(model=NAME, messages=QUESTION, temperature=0, max_tokens=12,
                                           extra_body=NO_THINKING).choices[0]
    assert reply.message.model_extra["reasoning_content"] is None
    assert reply.message.content == raw_text(server, QUESTION, NO_THINKING, max_tokens=12)
    refused = httpx.post(f"{server.url}/v1/chat/completions",
                         json={"model": NAME, "messages": QUESTION, "chat_template_kwargs": {"messages": []}})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "chat_template_kwargs"
