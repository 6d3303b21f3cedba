"""The Responses API on the real backend, as the official `openai` client and LangChain use it: created whole and
streamed (the SDK's own event types and its stream helper), parsed into a pydantic model, tool calls and their
outputs, the conversation continued by previous_response_id, and stored responses read and deleted."""

from __future__ import annotations

import json

import openai
import pytest
from pydantic import BaseModel

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city today.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                          "required": ["city"], "additionalProperties": False}}


def test_create_gives_output_text_and_usage(client, default_model):
    response = client.responses.create(model=default_model, input="Name a color.", instructions="Answer in one word.",
                                       max_output_tokens=8, temperature=0)
    assert response.object == "response" and response.status in ("completed", "incomplete")
    assert response.output_text and response.output[0].type == "message"
    assert response.usage.output_tokens <= 8 and response.usage.input_tokens > 0


def test_a_stream_sends_the_sdks_events_and_the_helper_assembles_them(client, default_model):
    events = list(client.responses.create(model=default_model, input="Count to five.", max_output_tokens=12,
                                          temperature=0, stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] in ("response.completed",
                                                                                        "response.incomplete")
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert deltas and deltas == events[-1].response.output_text
    with client.responses.stream(model=default_model, input="Count to five.", max_output_tokens=12,
                                 temperature=0) as stream:
        helped = list(stream)
        # The helper's final response is the completed one (an incomplete one is its last event's, as OpenAI's).
        final = stream.get_final_response() if helped[-1].type == "response.completed" else helped[-1].response
    texts = [event.delta for event in helped if event.type == "response.output_text.delta"]
    assert "".join(texts) == final.output_text == deltas  # greedy: the same answer


class Person(BaseModel):
    name: str
    age: int


def test_parse_gives_the_pydantic_model(client, default_model):
    response = client.responses.parse(model=default_model, input="Invent a person.", text_format=Person,
                                      max_output_tokens=60, temperature=0)
    assert isinstance(response.output_parsed, Person)


def test_a_function_call_and_its_output_round_trip_through_previous_response_id(client, default_model):
    first = client.responses.create(model=default_model, input="What is the weather in Oslo?", tools=[WEATHER],
                                    tool_choice="required", max_output_tokens=60, temperature=0)
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and isinstance(json.loads(call.arguments)["city"], str)
    second = client.responses.create(model=default_model, previous_response_id=first.id, tools=[WEATHER],
                                     input=[{"type": "function_call_output", "call_id": call.call_id,
                                             "output": "Sunny, 21 C"}], max_output_tokens=30, temperature=0)
    assert second.previous_response_id == first.id and second.status in ("completed", "incomplete")
    assert second.usage.input_tokens > first.usage.input_tokens  # the first turn and its call were read again


def test_stored_responses_are_retrieved_and_deleted(client, default_model):
    created = client.responses.create(model=default_model, input="Hi.", max_output_tokens=4)
    assert client.responses.retrieve(created.id).output_text == created.output_text
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)


def test_unsupported_fields_are_a_400_naming_them(client, default_model):
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model=default_model, input="Hi.", tools=[{"type": "web_search"}])
    assert refused.value.body["param"].startswith("tools.0")


def test_langchain_with_the_responses_api(backend, default_model):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=backend.url + "/v1", api_key="unused", model=default_model, temperature=0,
                     max_tokens=16, use_responses_api=True, max_retries=0)
    reply = llm.invoke("Say hello.")
    assert reply.text and reply.usage_metadata["output_tokens"] > 0
    streamed = list(llm.stream("Say hello."))
    assert "".join(chunk.text for chunk in streamed) == reply.text
