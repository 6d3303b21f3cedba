"""Grammars are compiled by openvino_genai's own compiler, with the served model's tokenizer: what it refuses is
refused with its reason."""

from __future__ import annotations

import json

import pytest

from ovgenai_common.errors import library_reason
from ovgenai_server.engine.contract.types import StructuredOutput
from ovgenai_server.engine.engine_process.grammar_compiler import GrammarCompiler
from ovgenai_server.request.structured_output import choice_grammar
from ovgenai_server.tools.calls import forced_call_schema
from tests.support.servers import MODELS

# Starts processes, servers or real pipelines: the system tier (not make test-unit).


@pytest.fixture(scope="module")
def checker(default_model):
    import openvino_genai

    from ovgenai_common.tokens import vocabulary_size

    tokenizer = openvino_genai.Tokenizer(str(MODELS / default_model))
    return GrammarCompiler(tokenizer, vocabulary_size(tokenizer))


def check(checker: GrammarCompiler, kind: str, value: str) -> str | None:
    return checker.compile(StructuredOutput(kind, value))


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("json_schema", json.dumps({"type": "object", "properties": {"name": {"type": "string"}}})),
        ("json_schema", json.dumps({"type": "object"})),
        ("regex", "[a-z]+@[a-z]+\\.com"),
        ("grammar", 'root ::= "yes" | "no"'),
        ("grammar", choice_grammar(['say "hi"', "back\\slash", "two\nlines", "ünï ☃ 😀", ""], "choice")),
        ("regex", ""),
        ("regex", ".*"),  # every token allowed, the least likely (token 0) too
        ("json_schema", json.dumps({"type": "object", "properties": {"child": {"$ref": "#"}}})),  # recursive, finite
        ("grammar", 'root ::= a\na ::= "x" | a "x"'),  # left-recursive, with a base case
    ],
)
def test_grammars_the_engine_can_run_pass(checker, kind, value):
    assert check(checker, kind, value) is None


@pytest.mark.parametrize(
    ("kind", "value", "reason"),
    [
        ("json_schema", json.dumps({"type": "nonsense"}), 'Unsupported type "nonsense"'),
        ("json_schema", json.dumps({"type": "integer", "minimum": 5, "maximum": 2}), "minimum greater than maximum"),
        ("json_schema", json.dumps({"type": "string", "pattern": "[a-z"}), "Unclosed '['"),
        ("json_schema", "{not json", ""),
        ("regex", "(unbalanced", ""),
        ("grammar", "root ::= undefined_rule", ""),
        ("regex", "[z-a]", "lower bound is larger than upper bound"),
        ("regex", "(?=a)b", "Lookahead is not supported"),
        ("regex", "\ud800", ""),
        ("grammar", "", 'root rule with name "root" is not found'),
        ("grammar", 'answer ::= "yes"', 'root rule with name "root" is not found'),
        ("grammar", 'root ::= "a" | "b', "string literal"),
        # They compile, and no text satisfies them: the engine masked every token and sampled at random.
        ("json_schema", json.dumps({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}), "No text"),
        ("json_schema", json.dumps({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                    "$ref": "#/$defs/a"}), "No text"),
        ("json_schema", json.dumps({"allOf": [{"$ref": "#"}]}), "No text"),
        ("grammar", 'root ::= a\na ::= a "x"', "No text"),
    ],
)
def test_grammars_the_compiler_refuses_are_refused_with_its_reason_and_no_source_path(checker, kind, value, reason):
    refusal = check(checker, kind, value)
    assert refusal is not None and reason in refusal, refusal
    assert ".cc" not in refusal and "/" not in refusal.replace(" / ", ""), refusal


def _place(field: str) -> dict:
    return {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}


# Tools as the openai SDK's pydantic_function_tool writes them: nested models under $defs, referred to from the root.
# Both name a definition "Place" (each its own), and one refers to its own root (a tree of places).
DEFINING_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"place": {"$ref": "#/$defs/Place"}}, "required": ["place"],
        "$defs": {"Place": _place("city")}}}},
    {"type": "function", "function": {"name": "get_route", "parameters": {
        "type": "object", "properties": {"to": {"$ref": "#/$defs/Place"}, "via": {"$ref": "#"}},
        "required": ["to"], "$defs": {"Place": _place("address")}}}},
]


@pytest.mark.parametrize("function", [None, "get_weather", "get_route"])
def test_forced_calls_to_tools_with_definitions_compile(checker, function):
    """tool_choice "required" places each tool's parameters inside one array schema: their references must still
    reach their own definitions there."""
    assert check(checker, "json_schema", json.dumps(forced_call_schema(DEFINING_TOOLS, function, True))) is None


def test_library_reason_keeps_the_compilers_words_only():
    error = RuntimeError("[10:03:15] /home/ci/b/_deps/xgrammar-src/cpp/json_schema_converter.cc:898: "
                         'Unsupported type "nonsense"\n')
    assert library_reason(error) == 'Unsupported type "nonsense"'
    check_failed = RuntimeError("/b/xgrammar-src/cpp/json_schema_converter.cc:1896: Check failed: (x) is false: "
                                "Invalid range: minimum greater than maximum")
    assert library_reason(check_failed) == "Invalid range: minimum greater than maximum"
    openvino = RuntimeError("Exception from src/inference/src/cpp/core.cpp:112:\nCheck 'x' failed at "
                            "src/plugins/intel_cpu/src/config.cpp:335:\nrepetition_penalty must be positive\n")
    assert library_reason(openvino) == "repetition_penalty must be positive"
