"""What a grammar costs the engine's compiler, estimated before it is compiled, and the bounds a JSON schema is held to.

xgrammar (inside openvino_genai) turns a JSON schema into a grammar and then works out, for each state of it, which of
the vocabulary's tokens may come next. Most schemas take milliseconds; a few shapes take seconds of a core each, and a
short schema can be one of them. Measured on a 2-core AMX Xeon, one grammar at a time (bench/results.md, 2026-11-28):
a string's `maxLength` ~14 ms per character up to ~300 (1.3 s at 100, ~4 s from 300 on), a `minLength` 0.2-0.9 s,
an object's optional properties ~0.015 ms times their number squared (500 took 3 s, 2,000 took 50 s), a counted
repetition in a `pattern` ~2.5 ms per count, a numeric range ~0.08 ms times its bounds' digits squared, ~0.1 ms per
enum value, a few ms per property and level. The compiler builds a rule once and reuses it, so each distinct
constraint is counted once. The estimate is in milliseconds of one core of that machine; slower CPUs take 2-3 times
as long.

A schema a request sends (response_format, vLLM's structured_outputs and guided_json, a tool's parameters) is held
to OpenAI's Structured Outputs limits (levels of nesting, properties, enum values, characters of names and values)
and to MAX_COMPILE_MS of estimated compile time: past any, the request is a 400 naming the field and the limit. A
regular expression or EBNF grammar is not refused by its estimate (the body's size and the compile time limit bound
it); every grammar's estimate travels with it (StructuredOutput.cost) and orders the engine's compiler queue.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# OpenAI's limits in its Structured Outputs guide (100 properties and 5 levels at its launch in 2024, since raised to
# these): 5,000 properties in all, 10 levels, 1,000 enum values, 120,000 characters of names, enum and const values.
MAX_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
MAX_SCHEMA_TEXT = 120_000
MAX_COMPILE_MS = 2000.0  # estimated: ~2 s of one core here, 4-6 s on the slower EPYCs (the default time limit is 10 s)

BASE_MS = 3.0  # any schema
NODE_MS = 0.3  # each schema in it
OBJECT_MS, PROPERTY_MS, OPTIONAL_MS = 1.5, 0.3, 0.015  # an object; per property; times its optional ones squared
LENGTH_MS, LENGTH_CAP = 14.0, 300  # a string's maxLength, per character up to the cap
MIN_LENGTH_MS, MIN_LENGTH_PER = 250.0, 2.0  # a string's minLength alone
REPEAT_MS, REPEAT_CAP = 2.5, 300  # a counted repetition {m,n} in a pattern, per count up to the cap
PATTERN_CHAR_MS = 0.03  # a pattern, regex or EBNF grammar, per character
RANGE_MS, RANGE_DIGITS_CAP = 0.08, 40  # a numeric range, times its widest bound's digits squared
ENUM_MS = 0.1  # per enum value
ARRAY_BOUNDS_MS, ARRAY_BOUND_MS, ARRAY_BOUND_CAP = 25.0, 0.2, 200  # minItems/maxItems
FORMAT_MS = {"email": 70.0, "hostname": 40.0, "idn-hostname": 40.0, "uri": 35.0, "iri": 35.0, "uri-reference": 35.0,
             "ipv6": 25.0}
OTHER_FORMAT_MS = 10.0

_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
_NUMERIC_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_NESTED_ONE = ("items", "additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems",
               "contains", "propertyNames", "not", "if", "then", "else")
_ALTERNATIVES = ("anyOf", "oneOf", "allOf")
_DEFINITIONS = ("$defs", "definitions")


def text_cost(text: str) -> float:
    """A regular expression or EBNF grammar's estimated compile time: its length and its counted repetitions."""
    repeats = sum(min(max(int(low), int(high or 0)), REPEAT_CAP) for low, high in _REPEAT.findall(text))
    return BASE_MS + PATTERN_CHAR_MS * len(text) + REPEAT_MS * repeats


@dataclass
class SchemaCost:
    """A JSON schema measured against the limits: its nesting, properties, enum values, text and estimated cost."""

    depth: int = 0
    properties: int = 0
    enum_values: int = 0
    text: int = 0
    cost: float = BASE_MS
    costliest: tuple[float, str] = (0.0, "")  # the one constraint that costs most, and what it is
    _seen: set[tuple[Any, ...]] = field(default_factory=set, repr=False)

    def add(self, ms: float, what: str, key: tuple[Any, ...] | None = None) -> None:
        """`ms` more, unless `key` names a constraint already counted (the compiler reuses its rule)."""
        if key is not None:
            if key in self._seen:
                return
            self._seen.add(key)
        self.cost += ms
        if ms > self.costliest[0]:
            self.costliest = (ms, what)

    def refusal(self, budget: float = MAX_COMPILE_MS) -> str | None:
        """Which limit the schema is past, said for a client; None within all."""
        if self.depth > MAX_DEPTH:
            return f"nests objects and arrays {self.depth} levels deep; at most {MAX_DEPTH} are allowed"
        if self.properties > MAX_PROPERTIES:
            return f"has {self.properties:,} properties; at most {MAX_PROPERTIES:,} are allowed"
        if self.enum_values > MAX_ENUM_VALUES:
            return f"has {self.enum_values:,} enum and const values; at most {MAX_ENUM_VALUES:,} are allowed"
        if self.text > MAX_SCHEMA_TEXT:
            return (f"has {self.text:,} characters of property names, definition names, enum and const values; at "
                    f"most {MAX_SCHEMA_TEXT:,} are allowed")
        if self.cost > budget:
            return (f"would take the grammar compiler about {self.cost / 1000:.1f} s of CPU time ({self.costliest[1]} "
                    f"costs most); at most {budget / 1000:g} s of estimated compile time are allowed per request")
        return None


def measure(schema: Any) -> SchemaCost:
    """A JSON schema's nesting, size and estimated compile time. Walked without recursion (a deep schema must not
    exhaust the stack); `$ref`s are not followed (their definitions are counted where they are defined)."""
    measured = SchemaCost()
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        if _is_container(node):
            depth += 1
            measured.depth = max(measured.depth, depth)
        measured.cost += NODE_MS
        stack += _children(node, depth, measured)
        _leaf_constraints(node, measured)
    return measured


def _is_container(node: dict[str, Any]) -> bool:
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return ("object" in kinds or "array" in kinds or isinstance(node.get("properties"), dict)
            or isinstance(node.get("items"), dict | list) or isinstance(node.get("prefixItems"), list))


def _children(node: dict[str, Any], depth: int, measured: SchemaCost) -> list[tuple[Any, int]]:
    """The schemas inside this one (with the depth they sit at), its properties and definitions counted."""
    children: list[tuple[Any, int]] = []
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = node.get("required")
        required = set(required) if isinstance(required, list) and all(isinstance(r, str) for r in required) else set()
        optional = sum(name not in required for name in properties)
        measured.properties += len(properties)
        measured.text += sum(len(name) for name in properties)
        measured.add(OBJECT_MS + PROPERTY_MS * len(properties) + OPTIONAL_MS * optional**2,
                     f"an object of {len(properties):,} properties ({optional:,} optional)")
        children += [(value, depth) for value in properties.values()]
    patterned = node.get("patternProperties")
    if isinstance(patterned, dict):
        children += [(value, depth) for value in patterned.values()]
        for pattern in patterned:
            measured.add(text_cost(pattern), f"the property pattern {_short(pattern)}", ("pattern", pattern))
    children += [(node[key], depth) for key in _NESTED_ONE if isinstance(node.get(key), dict)]
    if isinstance(node.get("items"), list):  # draft 4's tuple form
        children += [(item, depth) for item in node["items"]]
    if isinstance(node.get("prefixItems"), list):
        children += [(item, depth) for item in node["prefixItems"]]
    for key in _ALTERNATIVES:  # one of several schemas in the same place: no deeper
        if isinstance(node.get(key), list):
            children += [(option, depth - 1 if _is_container(node) else depth) for option in node[key]]
    for key in _DEFINITIONS:  # each a schema of its own, referred to from anywhere: counted from the top
        if isinstance(node.get(key), dict):
            measured.text += sum(len(name) for name in node[key])
            children += [(definition, 0) for definition in node[key].values()]
    return children


def _leaf_constraints(node: dict[str, Any], measured: SchemaCost) -> None:
    """What the node's own keywords cost: string lengths and patterns, formats, numeric ranges, enums, array sizes."""
    minimum, maximum = _number(node.get("minLength")), _number(node.get("maxLength"))
    if maximum is not None:
        measured.add(LENGTH_MS * min(maximum, LENGTH_CAP), f"a string's maxLength of {maximum:g}",
                     ("length", minimum, maximum))
    elif minimum:
        measured.add(MIN_LENGTH_MS + MIN_LENGTH_PER * min(minimum, LENGTH_CAP), f"a string's minLength of {minimum:g}",
                     ("length", minimum, None))
    if isinstance(node.get("pattern"), str):
        measured.add(text_cost(node["pattern"]), f"the pattern {_short(node['pattern'])}", ("pattern", node["pattern"]))
    if isinstance(node.get("format"), str):
        measured.add(FORMAT_MS.get(node["format"], OTHER_FORMAT_MS), f"the format {node['format']!r}",
                     ("format", node["format"]))
    bounds = tuple(_number(node.get(key)) for key in _NUMERIC_BOUNDS)
    if any(bound is not None for bound in bounds):
        digits = min(max(_digits(bound) for bound in bounds if bound is not None), RANGE_DIGITS_CAP)
        measured.add(RANGE_MS * digits**2, f"a numeric range of {digits}-digit bounds",
                     ("range", str(node.get("type")), bounds))
    values = list(node["enum"]) if isinstance(node.get("enum"), list) else []
    values += [node["const"]] if "const" in node else []
    if values:
        texts = [value if isinstance(value, str) else json.dumps(value) for value in values]
        measured.enum_values += len(values)
        measured.text += sum(len(text) for text in texts)
        measured.add(ENUM_MS * len(values), f"an enum of {len(values):,} values", ("enum", *texts))
    sizes = [size for size in (_number(node.get("minItems")), _number(node.get("maxItems"))) if size is not None]
    if sizes:
        measured.add(ARRAY_BOUNDS_MS + ARRAY_BOUND_MS * min(max(sizes), ARRAY_BOUND_CAP),
                     f"an array's bounds of {max(sizes):g} items")


def _number(value: Any) -> float | None:
    """A numeric keyword's value (a bool is not one; an integer past a float's range is infinite)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _digits(value: float) -> int:
    """How many digits the compiler's range rules follow for this bound: its integer part's and its fraction's."""
    if value != value or value in (float("inf"), float("-inf")):
        return RANGE_DIGITS_CAP
    whole, _, fraction = f"{abs(value):.17g}".partition(".")
    if "e" in whole or "e" in fraction:
        mantissa, _, exponent = f"{abs(value):e}".partition("e")
        return max(1, int(exponent) + 1) if int(exponent) >= 0 else len(mantissa) - 1 - int(exponent)
    return len(whole.lstrip("0") or "0") + len(fraction)


def _short(text: str, width: int = 40) -> str:
    return json.dumps(text if len(text) <= width else text[:width] + "…", ensure_ascii=False)
