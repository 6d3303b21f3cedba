"""A chat choice's text read as OpenAI's message parts (tools/chat_output.py): the reasoning, the answer and the tool
calls, as stream deltas piece by piece and as the unary message those deltas make, and OpenAI's finish reason. Through
HTTP, with the stream's framing: test_router.py."""

from __future__ import annotations

import json

import pytest

from ovgenai_server.engine.contract.types import SequenceDelta
from ovgenai_server.tools.chat_output import OutputPlan, final_reason, streamed_parts

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def read(plan: OutputPlan, pieces: list[str]):
    """Every delta of a choice fed these pieces, and the choice."""
    choice = plan.choice()
    deltas = [delta for piece in pieces for delta in choice.feed(piece)]
    return deltas + choice.finish(), choice


def split(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_a_plain_answer_streams_as_it_comes_and_needs_no_reading():
    plan = OutputPlan()
    assert not plan.active
    deltas, choice = read(plan, ["Hello", "", ", world"])
    assert deltas == [{"content": "Hello"}, {"content": ", world"}]
    assert choice.message(deltas) == {"role": "assistant", "content": "Hello, world"}
    assert choice.finish_reason("stop") == "stop" and choice.finish_reason("length") == "length"


@pytest.mark.parametrize("plan", [OutputPlan(reasoning=True), OutputPlan(tool_format="hermes3"),
                                  OutputPlan(forced=True)])
def test_reasoning_or_tools_need_the_text_read(plan):
    assert plan.active


def test_the_reasoning_is_apart_from_the_answer_in_any_split():
    text = "<think>The user greets me.</think>\n\nHello!"
    for size in (1, 2, 5, len(text)):
        deltas, choice = read(OutputPlan(reasoning=True), split(text, size))
        assert choice.message(deltas) == {"role": "assistant", "content": "Hello!",
                                          "reasoning_content": "The user greets me."}, size
        assert all(len(delta) == 1 for delta in deltas)  # each delta is reasoning or answer, never both


def test_a_reasoning_the_template_opened_and_an_answer_without_one():
    deltas, choice = read(OutputPlan(reasoning=True, inside=True), ["still thinking", "</think>", "Yes."])
    assert choice.message(deltas)["reasoning_content"] == "still thinking"
    deltas, choice = read(OutputPlan(reasoning=True), ["Just the answer."])
    assert choice.message(deltas) == {"role": "assistant", "content": "Just the answer.", "reasoning_content": None}


def test_a_tool_call_in_the_answer_is_a_call_and_the_choice_finishes_for_it():
    deltas, choice = read(OutputPlan(tool_format="hermes3"), split("Let me check. " + CALL))
    message = choice.message(deltas)
    [call] = message["tool_calls"]
    assert (call["type"], call["function"]["name"]) == ("function", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"} and call["id"].startswith("call_")
    assert message["content"] == "Let me check."
    assert choice.called and choice.finish_reason("stop") == "tool_calls"
    assert choice.finish_reason("length") == "length"  # cut short: the reason stays the engine's


def test_a_message_of_calls_alone_has_no_content_and_keeps_their_order():
    deltas, choice = read(OutputPlan(tool_format="hermes3"), [CALL, CALL.replace("Paris", "Rome")])
    message = choice.message(deltas)
    assert message["content"] is None
    assert [json.loads(c["function"]["arguments"])["city"] for c in message["tool_calls"]] == ["Paris", "Rome"]


def test_text_that_is_not_a_call_stays_the_answer():
    deltas, choice = read(OutputPlan(tool_format="hermes3"), ["No tools needed."])
    assert choice.message(deltas) == {"role": "assistant", "content": "No tools needed."}
    assert not choice.called and choice.finish_reason("stop") == "stop"


def test_a_named_function_forced_streams_its_arguments_and_finishes_as_a_plain_stop():
    plan = OutputPlan(forced=True, function="get_weather")
    deltas, choice = read(plan, ['{"city": ', '"Paris"}'])
    assert len(deltas) == 2 and deltas[0]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "name" not in deltas[1]["tool_calls"][0]["function"]  # later pieces carry arguments only
    [call] = choice.message(deltas)["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert choice.finish_reason("stop") == "stop"


def test_required_calls_finish_for_the_calls():
    output = json.dumps([{"name": "a", "parameters": {}}, {"name": "b", "parameters": {"x": 1}}])
    deltas, choice = read(OutputPlan(forced=True), split(output, 4))
    assert [c["function"]["name"] for c in choice.message(deltas)["tool_calls"]] == ["a", "b"]
    assert choice.finish_reason("stop") == "tool_calls"


def test_reasoning_before_a_call_is_kept_apart_from_it():
    deltas, choice = read(OutputPlan(tool_format="hermes3", reasoning=True), ["<think>Weather: a tool.</think>", CALL])
    message = choice.message(deltas)
    assert message["reasoning_content"] == "Weather: a tool." and message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


def test_a_streamed_delta_passes_through_the_reader_where_there_is_one():
    """What every streaming API (chat, Responses, Messages) sends for one engine delta."""
    assert streamed_parts(None, SequenceDelta(0, "Hi", 1)) == [{"content": "Hi"}]
    assert streamed_parts(None, SequenceDelta(0, "", 1, "stop")) == []
    assert final_reason(None, "length") == "length"
    reader = OutputPlan(reasoning=True).choice()
    assert streamed_parts(reader, SequenceDelta(0, "<think>why", 1)) == [{"reasoning_content": "why"}]
    ended = streamed_parts(reader, SequenceDelta(0, "</think>Yes", 1, "stop"))
    assert "".join(part.get("content", "") for part in ended) == "Yes"
    assert final_reason(reader, "stop") == "stop"
