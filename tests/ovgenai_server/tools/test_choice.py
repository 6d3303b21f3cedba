"""A chat request's tools and tool_choice planned (tools/choice.py): what the template renders, the grammar that
forces a call, how the output is to be read, and chat_template_kwargs as template variables; each refusal a 400
naming its field."""

from __future__ import annotations

import json

import pytest

from ovgenai_common.errors import ErrorKind
from ovgenai_server.api.protocol import ChatCompletionRequest
from ovgenai_server.engine.contract.grammar_cost import MAX_DEPTH
from ovgenai_server.tools.choice import plan_tools, template_variables, tool_names
from tests.support.replies import raised


def tool(name: str, **parameters) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", **parameters}}}


TOOLS = [tool("get_weather", properties={"city": {"type": "string"}}), tool("get_time")]


def plan(reasoning: bool = False, **fields):
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **fields)
    return plan_tools(request, "hermes3", reasoning)


def test_without_tools_or_with_none_nothing_is_rendered_or_read_for_calls():
    for fields in ({}, {"tools": TOOLS, "tool_choice": "none"}, {"tools": [], "tool_choice": "auto"}):
        planned = plan(reasoning=True, **fields)
        assert planned.tools is None and planned.forced is None, fields
        assert planned.plan.tool_format is None and not planned.plan.forced and planned.plan.reasoning


def test_auto_renders_the_tools_and_reads_calls_in_the_models_format():
    planned = plan(reasoning=True, tools=TOOLS, parallel_tool_calls=False)
    assert planned.tools == TOOLS and planned.forced is None
    assert (planned.plan.tool_format, planned.plan.parallel, planned.plan.reasoning) == ("hermes3", False, True)
    assert plan(tools=TOOLS, tool_choice="auto").plan.parallel  # parallel unless said otherwise


def test_required_is_forced_by_a_grammar_of_calls_to_any_tool():
    planned = plan(reasoning=True, tools=TOOLS, tool_choice="required")
    assert planned.tools == TOOLS and (planned.forced.kind, planned.forced.param) == ("json_schema", "tool_choice")
    assert json.loads(planned.forced.value)["type"] == "array"
    # The grammar constrains the whole output: no reasoning before the call.
    assert planned.plan.forced and planned.plan.function is None and not planned.plan.reasoning


def test_a_named_function_is_forced_by_its_parameters_schema():
    planned = plan(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert planned.plan.function == "get_weather" and planned.plan.forced
    assert json.loads(planned.forced.value)["properties"] == {"city": {"type": "string"}}


@pytest.mark.parametrize(("fields", "said"), [
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "'none', 'auto', 'required' or a named function"),
    ({"tool_choice": "required"}, "the request has no 'tools'"),
    ({"tools": [], "tool_choice": {"type": "function", "function": {"name": "f"}}}, "no 'tools'"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "'nope', which is not"),
    ({"tools": TOOLS, "tool_choice": {"type": "function"}}, "{\"name\": ...}"),
    ({"tools": TOOLS, "tool_choice": {"type": "tool", "function": {"name": "get_time"}}}, "{\"name\": ...}"),
])
def test_a_tool_choice_that_cannot_be_honoured_is_refused(fields, said):
    error = raised_invalid(plan, **fields)
    assert error.param == "tool_choice" and said in error.message, error.message


@pytest.mark.parametrize(("tools", "said"), [
    ([{"type": "retrieval"}], "'tools[0]' must be"),
    ([tool("a"), {"type": "function", "function": {"name": ""}}], "'tools[1]' must be"),
    ([{"type": "function", "function": {"name": "a", "parameters": []}}], "must be a JSON schema object"),
    ([{"type": "function", "function": {"name": "a", "parameters": {"type": "array"}}}], 'got "array"'),
    ([tool("a"), tool("a")], "must be unique"),
])
def test_tools_that_are_not_distinct_function_tools_are_refused(tools, said):
    error = raised_invalid(tool_names, tools)
    assert error.param == "tools" and said in error.message, error.message


def test_the_tools_names_in_order():
    assert tool_names(TOOLS) == ["get_weather", "get_time"]
    assert tool_names([{"type": "function", "function": {"name": "bare"}}]) == ["bare"]  # no parameters: none


def test_template_variables_add_to_the_servers_own():
    assert template_variables(None) == (None, True)
    assert template_variables({}, continue_final_message=True) == (None, False)
    assert template_variables({"enable_thinking": False}) == ({"enable_thinking": False}, True)
    assert template_variables(None, add_generation_prompt=False) == (None, False)


def test_add_generation_prompt_may_be_set_among_them_as_ovms_takes_it():
    assert template_variables({"add_generation_prompt": False}) == (None, False)
    assert template_variables({"add_generation_prompt": True, "x": 1}, continue_final_message=True) == ({"x": 1}, True)
    error = raised_invalid(template_variables, {"add_generation_prompt": "no"})
    assert error.param == "chat_template_kwargs" and "boolean" in error.message


def test_the_servers_own_variables_may_not_be_replaced():
    error = raised_invalid(template_variables, {"tools": [], "messages": [], "enable_thinking": True})
    assert error.param == "chat_template_kwargs" and "may not set messages, tools" in error.message


def raised_invalid(call, *args, **kwargs):
    return raised(call, *args, kind=ErrorKind.INVALID_REQUEST, **kwargs)


def deep(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "object", "properties": {"next": schema}}
    return {"properties": {"next": schema}}


def long_string(length: int) -> dict:
    return {"properties": {"name": {"type": "string", "maxLength": length}}}


def test_a_tool_past_the_bounds_is_refused_by_its_index_where_its_schema_becomes_a_grammar():
    tools = [*TOOLS, tool("nested", **deep(MAX_DEPTH + 1))]
    for fields in ({"tool_choice": "required"}, {"tool_choice": {"type": "function", "function": {"name": "nested"}}}):
        error = raised_invalid(plan, tools=tools, **fields)
        assert error.param == "tools" and error.message.startswith("'tools[2].function.parameters' nests"), error
    described = raised_invalid(plan_tools, ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}],
                                                                 tools=tools), "hermes3", False, False)
    assert described.param == "tools" and f"at most {MAX_DEPTH}" in described.message
    # Rendered by the template and read from the text, its schema compiles into nothing: not refused.
    assert plan(tools=tools).tools == tools
    # Another tool forced by name: the nested one is no part of the grammar.
    assert plan(tools=tools, tool_choice={"type": "function", "function": {"name": "get_time"}}).forced is not None


def test_tools_each_within_the_budget_but_not_together_are_refused_naming_tool_choice():
    tools = [tool(f"t{i}", **long_string(100 + i)) for i in range(3)]  # ~1.4 s each, estimated
    error = raised_invalid(plan, tools=tools, tool_choice="required")
    assert error.param == "tool_choice" and "estimated compile time" in error.message, error.message
    one = plan(tools=tools, tool_choice={"type": "function", "function": {"name": "t1"}}).forced
    assert one is not None and 1000 < one.cost < 2000
