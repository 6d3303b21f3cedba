"""A chat request's `tools`, `tool_choice`, `parallel_tool_calls` and `chat_template_kwargs`, checked: what the chat
template gets, and how the output is to be read (chat_output.OutputPlan)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ovgenai_common.errors import APIError, ErrorKind

from ..api.protocol import ChatCompletionRequest
from ..engine.contract.grammar_cost import MAX_COMPILE_MS, measure
from ..engine.contract.types import StructuredOutput
from .calls import ToolFormat, forced_call_schema
from .chat_output import OutputPlan
from .described import auto_schema, describe

# The variables the server itself gives a chat template: `chat_template_kwargs` may add variables, never replace
# these (a replaced `messages` would render a conversation other than the one the request sent).
TEMPLATE_VARIABLES = frozenset({
    "messages", "tools", "documents", "bos_token", "eos_token", "pad_token", "unk_token",
    "raise_exception", "strftime_now",
})


def _invalid(message: str, param: str) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, message, param)


@dataclass(frozen=True)
class ToolPlan:
    tools: list[dict[str, Any]] | None  # what the template renders (none with tool_choice "none")
    forced: StructuredOutput | None  # the grammar that forces a call (or, with described tools, the answer's form)
    plan: OutputPlan
    # For a template without tool syntax: the tools described in the system message (tools/described.py).
    description: str | None = None


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The functions' names, each tool checked to be an OpenAI function tool."""
    names = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise _invalid(f"'tools[{index}]' must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}.",
                           "tools")
        parameters = function.get("parameters", {})
        if not isinstance(parameters, dict):
            raise _invalid(f"'tools[{index}].function.parameters' must be a JSON schema object.", "tools")
        if parameters.get("type", "object") != "object":  # arguments are a JSON object, as OpenAI requires
            raise _invalid(f"'tools[{index}].function.parameters' must describe an object (\"type\": \"object\"), "
                           f"got {json.dumps(parameters.get('type'))}.", "tools")
        names.append(function["name"])
    if len(set(names)) != len(names):
        raise _invalid("Each tool's function name must be unique.", "tools")
    return names


def _named_function(choice: dict[str, Any], names: list[str]) -> str:
    function = choice.get("function") if choice.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise _invalid("'tool_choice' must be 'none', 'auto', 'required' or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}.", "tool_choice")
    if name not in names:
        raise _invalid(f"'tool_choice' names '{name}', which is not among 'tools'.", "tool_choice")
    return name


def plan_tools(request: ChatCompletionRequest, tool_format: ToolFormat, reasoning: bool,
               template_has_tools: bool = True) -> ToolPlan:
    """What a chat request's tools become. A template without tool syntax gets them described in the system message
    and the answer's form held by a grammar (tools/described.py), as llama.cpp's generic format does."""
    choice = request.tool_choice
    parallel = request.parallel_tool_calls is not False
    if choice is not None and not isinstance(choice, dict) and choice not in ("none", "auto", "required"):
        raise _invalid("'tool_choice' must be 'none', 'auto', 'required' or a named function.", "tool_choice")
    tools = request.tools or None
    names = tool_names(tools) if tools else []
    if choice == "none" or not tools:
        if choice not in (None, "none", "auto"):
            raise _invalid("'tool_choice' forces a tool call, but the request has no 'tools'.", "tool_choice")
        return ToolPlan(None, None, OutputPlan(reasoning=reasoning))
    description = None if template_has_tools else describe(tools, parallel)
    shown = tools if template_has_tools else None
    if choice in (None, "auto"):
        if description is not None:  # the model chooses calls or a response, in a form the grammar holds it to
            answer = _grammar(auto_schema(tools, parallel), tools, None, "tools")
            return ToolPlan(None, answer, OutputPlan(described=True, parallel=parallel), description)
        return ToolPlan(tools, None, OutputPlan(tool_format=tool_format, parallel=parallel, reasoning=reasoning))
    function = _named_function(choice, names) if isinstance(choice, dict) else None
    forced = _grammar(forced_call_schema(tools, function, parallel), tools, function, "tool_choice")
    # The grammar constrains the whole output, so a forced call leaves no room for reasoning before it.
    return ToolPlan(shown, forced, OutputPlan(forced=True, function=function, parallel=parallel), description)


def _grammar(schema: dict[str, Any], tools: list[dict[str, Any]], function: str | None,
             param: str) -> StructuredOutput:
    """The grammar that holds a call (or a described tool's answer): each tool's parameters in it within the bounds
    of a JSON schema (engine/contract/grammar_cost.py), and all of them, as one grammar, within its compile budget."""
    for index, tool in enumerate(tools):
        if function is None or tool["function"]["name"] == function:
            refusal = measure(tool["function"].get("parameters") or {}).refusal()
            if refusal is not None:
                raise _invalid(f"'tools[{index}].function.parameters' {refusal}.", "tools")
    cost = measure(schema).cost
    if cost > MAX_COMPILE_MS:
        raise _invalid(f"The tools' parameters, one grammar for '{param}', would take the grammar compiler about "
                       f"{cost / 1000:.1f} s of CPU time; at most {MAX_COMPILE_MS / 1000:g} s of estimated compile "
                       "time are allowed per request.", param)
    return StructuredOutput("json_schema", json.dumps(schema), param, cost)


def template_variables(kwargs: dict[str, Any] | None, add_generation_prompt: bool | None = None,
                       continue_final_message: bool = False) -> tuple[dict[str, Any] | None, bool]:
    """(`chat_template_kwargs` as template variables, add_generation_prompt), refused where it would replace the
    server's own template variables. `add_generation_prompt` may be set there, as OVMS takes it: false continues the
    last assistant message instead of opening a new turn (assistant prefill). Not set anywhere, it is true unless
    the request continues its final message (vLLM's `continue_final_message`)."""
    if add_generation_prompt is None:
        add_generation_prompt = not continue_final_message
    if not kwargs:
        return None, add_generation_prompt
    clashing = sorted(set(kwargs) & TEMPLATE_VARIABLES)
    if clashing:
        raise _invalid(f"'chat_template_kwargs' may not set {', '.join(clashing)}: the server sets it.",
                       "chat_template_kwargs")
    variables = dict(kwargs)
    add_generation_prompt = variables.pop("add_generation_prompt", add_generation_prompt)
    if not isinstance(add_generation_prompt, bool):
        raise _invalid("'chat_template_kwargs.add_generation_prompt' must be a boolean.", "chat_template_kwargs")
    return variables or None, add_generation_prompt
