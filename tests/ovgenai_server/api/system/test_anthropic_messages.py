"""Anthropic's Messages API on the real backend, through Anthropic's own SDK: a message whole and streamed (the
SDK's stream helper assembles the events), stop sequences, tool use and its result, token counts, and a refusal the
SDK raises as its own error."""

from __future__ import annotations

import json

import pytest

anthropic = pytest.importorskip("anthropic")  # make test installs it (the dev extra)

WEATHER = {"name": "get_weather", "description": "The weather in a city today.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                            "required": ["city"], "additionalProperties": False}}
QUESTION = [{"role": "user", "content": "What is the weather in Oslo?"}]
GREEDY = {"temperature": 0}  # Anthropic's SDK no longer sends sampling values of its own: as extras, as others do


@pytest.fixture(scope="module")
def client(backend):
    return anthropic.Anthropic(base_url=backend.url, api_key="unused", max_retries=0)


def test_a_message_and_the_same_one_streamed(client, default_model):
    message = client.messages.create(model=default_model, max_tokens=12, extra_body=GREEDY, system="Answer briefly.",
                                     messages=[{"role": "user", "content": "Name a color."}])
    assert message.type == "message" and message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens") and message.usage.output_tokens <= 12
    with client.messages.stream(model=default_model, max_tokens=12, extra_body=GREEDY, system="Answer briefly.",
                                messages=[{"role": "user", "content": "Name a color."}]) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == final.content[0].text == message.content[0].text  # greedy: the same answer
    assert final.usage.output_tokens == message.usage.output_tokens


def test_a_stop_sequence_ends_the_text_and_is_named(client, default_model):
    stops = [",", "."]
    message = client.messages.create(model=default_model, max_tokens=60, extra_body=GREEDY, stop_sequences=stops,
                                     messages=[{"role": "user", "content": "Describe the sea in two sentences."}])
    assert message.stop_reason == "stop_sequence" and message.stop_sequence in stops
    assert not any(stop in message.content[0].text for stop in stops)


def test_tool_use_and_its_result(client, default_model):
    message = client.messages.create(model=default_model, max_tokens=60, extra_body=GREEDY, messages=QUESTION,
                                     tools=[WEATHER], tool_choice={"type": "any"})
    [use] = [block for block in message.content if block.type == "tool_use"]
    assert use.name == "get_weather" and isinstance(use.input["city"], str) and message.stop_reason == "tool_use"
    answer = client.messages.create(model=default_model, max_tokens=30, extra_body=GREEDY, tools=[WEATHER], messages=[
        *QUESTION, {"role": "assistant", "content": message.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 C"}]}])
    assert answer.content and answer.usage.input_tokens > message.usage.input_tokens


def test_a_json_output_format_holds_the_text_to_its_schema(client, default_model):
    schema = {"type": "object", "properties": {"color": {"type": "string", "maxLength": 12}}, "required": ["color"],
              "additionalProperties": False}
    message = client.messages.create(model=default_model, max_tokens=40, extra_body=GREEDY,
                                     messages=[{"role": "user", "content": "Name a color."}],
                                     output_config={"format": {"type": "json_schema", "schema": schema}})
    assert isinstance(json.loads(message.content[0].text)["color"], str)


def test_count_tokens_matches_the_messages_usage(client, default_model):
    counted = client.messages.count_tokens(model=default_model, messages=QUESTION, tools=[WEATHER])
    message = client.messages.create(model=default_model, max_tokens=1, messages=QUESTION, tools=[WEATHER])
    assert counted.input_tokens == message.usage.input_tokens


def test_a_refusal_is_the_sdks_bad_request_error(client, default_model):
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model=default_model, max_tokens=5, messages=QUESTION,
                               tools=[{"type": "web_search_20250305", "name": "web_search"}])
    assert refused.value.body["error"]["type"] == "invalid_request_error"
