"""A grammar's compile time estimated before it is compiled, and a JSON schema's bounds
(engine/contract/grammar_cost.py): the schemas clients send every day pass, each costly shape is refused naming its
limit, and a constraint the compiler builds once is counted once."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from ovgenai_server.engine.contract.grammar_cost import (
    MAX_DEPTH,
    MAX_ENUM_VALUES,
    MAX_PROPERTIES,
    measure,
    text_cost,
)


def obj(properties: dict, required: bool = True) -> dict:
    return {"type": "object", "properties": properties, **({"required": list(properties)} if required else {})}


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for level in range(levels):
        schema = obj({f"k{level}": schema, f"x{level}": {"type": "integer"}})
    return schema


# OpenAI's own Structured Outputs and function-calling examples.
WEATHER = {"type": "object", "additionalProperties": False, "required": ["location", "unit"], "properties": {
    "location": {"type": "string", "description": "The location to get the weather for"},
    "unit": {"type": ["string", "null"], "enum": ["F", "C"]}}}
QUERY = obj({
    "table_name": {"type": "string", "enum": ["orders"]},
    "columns": {"type": "array", "items": {"type": "string", "enum": ["id", "status", "shipped_at", "ordered_at"]}},
    "conditions": {"type": "array", "items": obj({
        "column": {"type": "string"}, "operator": {"type": "string", "enum": ["=", ">", "<", ">=", "<=", "!="]},
        "value": {"anyOf": [{"type": "string"}, {"type": "number"}, obj({"column_name": {"type": "string"}})]}})},
    "order_by": {"type": "string", "enum": ["asc", "desc"]}})
UI = obj({"type": {"type": "string", "enum": ["div", "button", "header", "section", "field", "form"]},
          "label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}},
          "attributes": {"type": "array", "items": obj({"name": {"type": "string"}, "value": {"type": "string"}})}})


# Models as LangChain's with_structured_output and the openai SDK's pydantic_function_tool turn them into schemas.
class Joke(BaseModel):
    setup: str = Field(description="The setup of the joke")
    punchline: str = Field(description="The punchline to the joke")
    rating: int | None = Field(default=None, description="How funny the joke is, from 1 to 10")


class Person(BaseModel):
    name: str | None = None
    hair_color: str | None = None
    height_in_meters: float | None = None


class People(BaseModel):
    people: list[Person]


class Place(BaseModel):
    city: str = Field(max_length=20)


class GetForecast(BaseModel):
    place: Place
    days: int = Field(ge=1, le=7)


class Ticket(BaseModel):
    title: str = Field(max_length=80)
    priority: Literal["low", "medium", "high", "urgent"]
    estimate_hours: float = Field(ge=0, le=1000)
    tags: list[str] = Field(default_factory=list, max_length=10)
    assignee: str | None = None


ORDINARY = {
    "openai weather": WEATHER, "openai query": QUERY, "openai recursive UI": UI, "json_object": {"type": "object"},
    "langchain joke": Joke.model_json_schema(), "langchain people ($defs)": People.model_json_schema(),
    "forecast ($defs, maxLength 20)": GetForecast.model_json_schema(), "ticket": Ticket.model_json_schema(),
    "120 patterned properties": obj({f"p{k}": {"type": "string", "pattern": f"[a-z]{{{k % 7 + 1}}}[0-9]+"}
                                     for k in range(120)}),
    "10 levels": nested(MAX_DEPTH),  # objects in objects, the root the first (a string leaf is no level)
}


@pytest.mark.parametrize("schema", ORDINARY.values(), ids=ORDINARY.keys())
def test_the_schemas_clients_send_pass(schema):
    measured = measure(schema)
    assert measured.refusal() is None, measured


@pytest.mark.parametrize("schema", [Joke.model_json_schema(), WEATHER, QUERY])
def test_the_commonest_schemas_are_cheap_enough_for_the_compilers_small_lane(schema):
    from ovgenai_server.engine.engine_process.grammar_worker import SMALL_GRAMMAR_MS

    assert measure(schema).cost <= SMALL_GRAMMAR_MS


@pytest.mark.parametrize(
    ("schema", "limit"),
    [
        (nested(40), f"40 levels deep; at most {MAX_DEPTH}"),
        (nested(MAX_DEPTH + 1), f"{MAX_DEPTH + 1} levels deep"),
        ({"type": "array", "items": {"type": "array", "items": nested(MAX_DEPTH)}}, "levels deep"),
        (obj({f"p{i}": {"type": "integer"} for i in range(MAX_PROPERTIES + 1)}), f"at most {MAX_PROPERTIES:,}"),
        (obj({"e": {"enum": list(range(MAX_ENUM_VALUES + 1))}}), f"at most {MAX_ENUM_VALUES:,} are allowed"),
        (obj({"e": {"enum": ["x" * 130_000]}}), "characters of property names"),
        (obj({"s": {"type": "string", "maxLength": 300}}), "a string's maxLength of 300 costs most"),
        (obj({f"s{i}": {"type": "string", "maxLength": 90 + i} for i in range(5)}), "maxLength"),
        (obj({f"p{i}": {"type": "string"} for i in range(500)}, required=False), "500 properties (500 optional)"),
        (obj({"s": {"type": "string", "pattern": "^[a-z]{0,1000}[0-9]{0,500}[A-Z]{0,300}$"}}), "the pattern"),
        (obj({f"n{i}": {"type": "number", "minimum": -1e300, "maximum": 1e300 + i * 1e290} for i in range(20)}),
         "numeric range"),
    ],
)
def test_each_costly_shape_is_refused_naming_its_limit(schema, limit):
    refusal = measure(schema).refusal()
    assert refusal is not None and limit in refusal, refusal


def test_the_estimate_grows_as_the_compile_does():
    lengths = [measure(obj({"s": {"type": "string", "maxLength": n}})).cost for n in (10, 50, 100, 200)]
    optional = [measure(obj({f"p{i}": {"type": "string"} for i in range(n)}, False)).cost for n in (10, 100, 400)]
    widths = [measure(obj({"n": {"type": "integer", "minimum": 0, "maximum": 10**w}})).cost for w in (2, 9, 18)]
    assert lengths == sorted(lengths) and optional == sorted(optional) and widths == sorted(widths)
    # Measured on the reference Xeon: maxLength 100 ~1.3 s, 400 optional properties ~2 s, an 18-digit range ~20 ms.
    assert 700 < lengths[2] < 2000 and 1000 < optional[2] < 4000 and widths[2] < 60


def test_a_constraint_the_compiler_builds_once_is_counted_once():
    once = measure(obj({"a": {"type": "string", "maxLength": 100}})).cost
    same = measure(obj({k: {"type": "string", "maxLength": 100} for k in "abcde"})).cost
    distinct = measure(obj({k: {"type": "string", "maxLength": 100 + i} for i, k in enumerate("abcde")})).cost
    assert same < once * 1.1 and distinct > once * 4


def test_alternatives_and_definitions_do_not_nest_deeper_and_references_are_not_followed():
    leaf = nested(MAX_DEPTH)
    assert measure({"anyOf": [leaf, {"type": "null"}]}).depth == MAX_DEPTH
    assert measure({"$defs": {"Leaf": leaf}, "$ref": "#/$defs/Leaf"}).depth == MAX_DEPTH
    assert measure({"type": "object", "properties": {"self": {"$ref": "#"}}}).refusal() is None


def test_malformed_and_extreme_values_are_measured_without_failing_and_left_unchanged():
    schema = obj({"e": {"enum": ["a"], "const": "a"}, "n": {"type": "integer", "minimum": -(10**400), "maximum": True},
                  "r": {"required": "no", "properties": []}, "f": {"type": "number", "maximum": float("nan")}})
    before = json.dumps(schema)
    measured = measure(schema)
    assert json.dumps(schema) == before and measured.enum_values == 2
    deep: dict = {}
    for _ in range(10_000):  # no recursion: the body's own depth limit is the caller's, not this walk's
        deep = {"type": "array", "items": deep}
    assert measure(deep).depth == 10_000


def test_a_regex_or_grammar_is_estimated_by_its_length_and_counted_repetitions():
    assert text_cost("[a-z]+") < text_cost("[a-z]{0,100}") < text_cost("[a-z]{0,1000}")
    assert text_cost("[a-z]{0,1000}") == text_cost("[a-z]{0,5000}")  # repetitions past 300 cost alike
    slow = "".join(f"[a-{chr(ord('b') + i % 20)}]" for i in range(8000))  # ~1.3 s measured
    assert 500 < text_cost(slow) < 3000
