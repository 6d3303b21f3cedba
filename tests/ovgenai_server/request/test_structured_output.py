"""Output constraints in a request (response_format, vLLM's structured_outputs and guided_* fields) become the one
grammar openvino_genai runs (request/structured_output.py), or a 400 naming the field; a grammar the engine's compiler
refuses is refused before admission, naming the field too."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.api.protocol import ChatCompletionRequest, CompletionRequest
from ovgenai_server.engine.contract.grammar_cost import MAX_DEPTH, measure, text_cost
from ovgenai_server.engine.contract.types import StructuredOutput
from ovgenai_server.engine.engine_process.generation_config import build_generation_config
from ovgenai_server.request.sampling import build_params
from ovgenai_server.request.structured_output import check_compiles, requested
from tests.support.fake_engine import FakeRuntime, fake_model

LIMITS = {"prompt_tokens": 10, "max_context": 100, "best_of_limit": 4, "max_n": 4}
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


def chat(**fields) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **fields})


def structured(**fields) -> StructuredOutput | None:
    return build_params(chat(**fields), **LIMITS).structured_output


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"structured_outputs": {"regex": "[0-9]{3}"}}, ("regex", "[0-9]{3}", "structured_outputs.regex")),
        ({"guided_regex": "[0-9]{3}"}, ("regex", "[0-9]{3}", "guided_regex")),
        ({"structured_outputs": {"grammar": 'root ::= "a"'}},
         ("grammar", 'root ::= "a"', "structured_outputs.grammar")),
        ({"guided_grammar": 'root ::= "a"'}, ("grammar", 'root ::= "a"', "guided_grammar")),
        ({"structured_outputs": {"choice": ["yes", "no"]}},
         ("grammar", 'root ::= "yes" | "no"', "structured_outputs.choice")),
        ({"guided_choice": ["yes"]}, ("grammar", 'root ::= "yes"', "guided_choice")),
        ({"structured_outputs": {"json": SCHEMA}}, ("json_schema", json.dumps(SCHEMA), "structured_outputs.json")),
        ({"guided_json": json.dumps(SCHEMA, indent=2)}, ("json_schema", json.dumps(SCHEMA), "guided_json")),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}},
         ("json_schema", json.dumps(SCHEMA), "response_format")),
    ],
)
def test_each_spelling_maps_to_the_grammar_kind_openvino_genai_runs_and_remembers_its_field(fields, expected):
    result = structured(**fields)
    assert (result.kind, result.value, result.param) == expected
    config = build_generation_config(build_params(chat(**fields), **LIMITS), [2]).structured_output_config
    assert getattr(config, result.kind) == result.value


def test_completions_take_the_same_fields():
    request = CompletionRequest.model_validate({"prompt": "a", "structured_outputs": {"regex": "b+"}})
    expected = StructuredOutput("regex", "b+", "structured_outputs.regex", text_cost("b+"))
    assert build_params(request, **LIMITS).structured_output == expected


def test_no_constraint_and_a_text_response_format_leave_the_output_free():
    assert structured() is None
    assert structured(response_format={"type": "text"}) is None


def test_choices_are_string_literals_whatever_characters_they_hold():
    choices = ['say "hi"', "back\\slash", "two\nlines", "ünï ☃", ""]
    grammar = structured(guided_choice=choices).value
    literals = grammar.removeprefix("root ::= ").split(" | ")
    assert [json.loads(literal) for literal in literals] == choices


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
        ({"guided_choice": []}, "guided_choice"),
        ({"structured_outputs": {}}, "structured_outputs"),
        ({"structured_outputs": {"json": "{not json"}}, "structured_outputs.json"),
        ({"guided_json": "[1, 2]"}, "guided_json"),
        # More than one constraint: the second is named.
        ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice"),
        ({"structured_outputs": {"regex": "a", "grammar": 'root ::= "a"'}}, "structured_outputs.grammar"),
        ({"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
         "structured_outputs.regex"),
        ({"guided_regex": "a", "structured_outputs": {"regex": "a"}}, "structured_outputs.regex"),
    ],
)
def test_what_cannot_be_run_is_a_400_naming_the_field(fields, param):
    with pytest.raises(APIError) as error:
        structured(**fields)
    assert error.value.param == param, error.value.message
    assert error.value.kind is ErrorKind.INVALID_REQUEST


@pytest.mark.parametrize(
    "fields",
    [
        {"structured_outputs": {"regex": "a", "whitespace_pattern": " "}},  # vLLM options this engine does not have
        {"structured_outputs": {"json_schema": SCHEMA}},  # the field is spelled `json`, as vLLM spells it
        {"structured_outputs": {"choice": ["a", 1]}},
        {"guided_regex": ["a"]},
    ],
)
def test_the_request_model_refuses_malformed_constraints(fields):
    with pytest.raises(ValidationError):
        chat(**fields)


def test_a_json_object_is_any_object_and_a_json_schema_needs_its_schema():
    any_object = requested(chat(response_format={"type": "json_object"}))
    assert (any_object.kind, any_object.value, any_object.param) == ("json_schema", '{"type": "object"}',
                                                                      "response_format")
    with pytest.raises(APIError) as refused:
        requested(chat(response_format={"type": "json_schema", "json_schema": {"name": "x"}}))
    assert refused.value.param == "response_format" and "schema" in refused.value.message


async def test_a_grammar_the_compiler_refuses_is_a_400_naming_its_field():
    runtime = FakeRuntime()
    model = fake_model(runtime)
    await check_compiles(model, None)
    await check_compiles(model, StructuredOutput("regex", "[0-9]+", "guided_regex"))
    with pytest.raises(APIError) as refused:
        await check_compiles(model, StructuredOutput("regex", "refuse me", "guided_regex"))
    assert refused.value.param == "guided_regex" and "refused by the fake compiler" in refused.value.message
    assert refused.value.kind is ErrorKind.INVALID_REQUEST and not runtime.calls  # nothing reached the engine


def deep(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"next": schema}, "required": ["next"]}
    return schema


LONG_STRING = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 300}}}


@pytest.mark.parametrize(
    ("fields", "param", "limit"),
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": deep(MAX_DEPTH + 2)}}},
         "response_format", f"{MAX_DEPTH + 2} levels deep; at most {MAX_DEPTH}"),
        ({"structured_outputs": {"json": LONG_STRING}}, "structured_outputs.json", "maxLength of 300 costs most"),
        ({"guided_json": json.dumps(LONG_STRING)}, "guided_json", "estimated compile time"),
    ],
)
def test_a_schema_past_its_bounds_is_a_400_naming_the_field_and_the_limit(fields, param, limit):
    with pytest.raises(APIError) as refused:
        structured(**fields)
    assert refused.value.param == param and refused.value.kind is ErrorKind.INVALID_REQUEST
    assert refused.value.message.startswith(f"'{param}' ") and limit in refused.value.message, refused.value.message


def test_each_grammar_carries_its_estimated_cost_for_the_engines_compiler_queue():
    within = deep(MAX_DEPTH)
    assert structured(guided_json=within).cost == measure(within).cost > 0
    assert structured(guided_regex="[a-z]{0,100}").cost == text_cost("[a-z]{0,100}")
    assert structured(guided_choice=["yes", "no"]).cost == text_cost('root ::= "yes" | "no"')
