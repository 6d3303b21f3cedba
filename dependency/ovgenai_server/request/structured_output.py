"""Structured output: the one grammar a request constrains its output with (OpenAI's `response_format`, vLLM's
`structured_outputs` and older `guided_*` fields), as openvino_genai runs it, and the check that the engine's
compiler takes it, made before admission. A JSON schema is held to the bounds of engine/contract/grammar_cost.py
(nesting, properties, enum values, estimated compile time) before the engine sees it."""

from __future__ import annotations

import json
from typing import Any, Literal

from ovgenai_common.body import MAX_JSON_DEPTH, loads
from ovgenai_common.errors import APIError, ErrorKind, invalid

from ..api.protocol import SamplingRequest
from ..engine.contract.grammar_cost import measure, text_cost
from ..engine.contract.types import EngineBusy, EngineError, StructuredOutput
from ..models.registry import ServedModel


def requested(request: SamplingRequest) -> StructuredOutput | None:
    """The one grammar the request constrains its output with (`response_format`, vLLM's `structured_outputs` or
    its older `guided_*` fields); whether the compiler takes it is checked before admission (`checked`)."""
    constraints = [c for c in (_response_format(request), *_vllm_constraints(request)) if c is not None]
    if len(constraints) > 1:
        named = " and ".join(f"'{c.param}'" for c in constraints)
        raise invalid(f"Only one output constraint may be set per request; got {named}.", constraints[1].param)
    return constraints[0] if constraints else None


def _response_format(request: SamplingRequest) -> StructuredOutput | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return json_schema({"type": "object"}, "response_format")
    schema = (fmt.json_schema or {}).get("schema")
    if not isinstance(schema, dict):
        raise invalid("'response_format.json_schema.schema' must be a JSON schema object.", "response_format")
    return json_schema(schema, "response_format")


def json_schema(schema: dict[str, Any], param: str) -> StructuredOutput:
    """A JSON schema as the grammar the engine compiles, within the bounds (a 400 naming `param` and the limit)."""
    measured = measure(schema)
    refusal = measured.refusal()
    if refusal is not None:
        raise invalid(f"'{param}' {refusal}.", param)
    return StructuredOutput("json_schema", json.dumps(schema), param, measured.cost)


def _text(kind: Literal["regex", "grammar"], value: str, param: str) -> StructuredOutput:
    """A regular expression or EBNF grammar, with its estimated cost (bounded by the compile time limit only)."""
    return StructuredOutput(kind, value, param, text_cost(value))


def _vllm_constraints(request: SamplingRequest) -> list[StructuredOutput]:
    """Each of vLLM's constraint fields that is set, as the grammar openvino_genai runs it."""
    found = _constraints(
        "guided_", request.guided_json, request.guided_regex, request.guided_choice, request.guided_grammar
    )
    nested = request.structured_outputs
    if nested is not None:
        inner = _constraints("structured_outputs.", nested.json_schema, nested.regex, nested.choice, nested.grammar)
        if not inner:
            raise invalid("'structured_outputs' must set one of json, regex, choice or grammar.", "structured_outputs")
        found += inner
    return found


def _constraints(
    prefix: str, schema: dict[str, Any] | str | None, regex: str | None, choice: list[str] | None, grammar: str | None
) -> list[StructuredOutput]:
    found = []
    if schema is not None:
        found.append(json_schema(_schema_object(schema, prefix + "json"), prefix + "json"))
    if regex is not None:
        found.append(_text("regex", regex, prefix + "regex"))
    if choice is not None:
        found.append(_text("grammar", choice_grammar(choice, prefix + "choice"), prefix + "choice"))
    if grammar is not None:
        found.append(_text("grammar", grammar, prefix + "grammar"))
    return found


def _schema_object(schema: dict[str, Any] | str, param: str) -> dict[str, Any]:
    """A JSON schema given as an object or as its JSON text (vLLM takes both), as an object."""
    if isinstance(schema, str):  # parsed by the body's rules: its depth bounded, and JSON only (ovgenai_common/body.py)
        try:
            schema = loads(schema, MAX_JSON_DEPTH, param)
        except APIError as error:
            raise invalid(f"'{param}' must be a JSON schema object or its JSON text: {error.message}", param) from None
    if not isinstance(schema, dict):
        raise invalid(f"'{param}' must be a JSON schema object or its JSON text.", param)
    return schema


def choice_grammar(choices: list[str], param: str) -> str:
    """An EBNF grammar whose only sentences are the choices (as vLLM's xgrammar backend builds one): each choice is
    a string literal, written with JSON's escapes, which the EBNF parser reads the same way."""
    if not choices:
        raise invalid(f"'{param}' must list at least one string.", param)
    return "root ::= " + " | ".join(json.dumps(choice, ensure_ascii=False) for choice in choices)


async def check_compiles(model: ServedModel, structured: StructuredOutput | None) -> None:
    """A 400 naming the field when the engine's compiler refuses the grammar
    (engine/engine_process/grammar_compiler.py): a grammar it refuses must never reach the engine."""
    if structured is None:
        return
    try:
        refusal = await model.runtime.check_structured_output(structured)
    except EngineBusy as busy:
        raise APIError(ErrorKind.OVERLOADED, str(busy), retry_after=busy.retry_after) from busy
    except EngineError as error:
        raise APIError(ErrorKind.UNAVAILABLE, str(error)) from error
    if refusal is not None:
        raise invalid(f"'{structured.param}' cannot be used: {refusal}", structured.param)
