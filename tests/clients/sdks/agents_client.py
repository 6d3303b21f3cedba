"""OpenAI's Agents SDK against the backend, through both of its models (Chat Completions and the Responses API): an
agent made to use its tool calls it, and the SDK runs the tool and ends with the tool's result."""

from __future__ import annotations

import os

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

BASE, MODEL = os.environ["CLIENT_SUITE_BASE_URL"], os.environ["CLIENT_SUITE_MODEL"]
set_tracing_disabled(True)  # the SDK would send its traces to OpenAI


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


@pytest.mark.parametrize("model_class", [OpenAIChatCompletionsModel, OpenAIResponsesModel])
def test_an_agent_calls_its_tool_and_ends_with_its_result(model_class):
    model = model_class(model=MODEL, openai_client=AsyncOpenAI(base_url=BASE, api_key="unused", max_retries=0))
    agent = Agent(name="forecaster", instructions="Answer with the get_weather tool.", tools=[get_weather],
                  model=model, tool_use_behavior="stop_on_first_tool",
                  model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=64))
    result = Runner.run_sync(agent, "What is the weather in Paris?")
    assert str(result.final_output).startswith("It is sunny in ")
    assert any(item.type == "tool_call_output_item" for item in result.new_items)
