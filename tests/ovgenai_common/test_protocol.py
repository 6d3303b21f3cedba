"""The base of every service's OpenAI request models: values strictly typed, unknown fields kept only to be named in
a 400, and bodies documented as closed (the fuzzer's findings, kept as tests)."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BeforeValidator, ValidationError

from ovgenai_common.errors import APIError
from ovgenai_common.protocol import OpenAIModel, StreamOptions, counted


class Body(OpenAIModel):
    stream: bool = False
    stream_options: StreamOptions | None = None


def test_values_of_another_type_are_refused():
    for body in ('{"stream": 0.0}', '{"stream": "true"}', '{"stream_options": {"include_usage": "yes"}}'):
        with pytest.raises(ValidationError):
            Body.model_validate_json(body)


def test_unknown_fields_are_named_in_a_400_and_the_ignored_ones_pass():
    Body.model_validate_json('{"user": "u", "service_tier": "auto"}').refuse_unknown_fields()
    with pytest.raises(APIError) as refused:
        Body.model_validate_json('{"best_of_all": 1, "user": "u"}').refuse_unknown_fields()
    assert refused.value.param == "best_of_all"


def test_bodies_are_documented_as_closed():
    schema = Body.model_json_schema()
    assert schema["additionalProperties"] is False
    assert "user" in schema["properties"]  # accepted and ignored, so documented


class Listed(OpenAIModel):
    items: Annotated[list[Body], BeforeValidator(counted("items", 10, parts=4))] = []


def test_a_list_past_its_bound_is_refused_before_its_items_are_validated():
    """A body of 120,000 small items held the event loop for seconds while each was validated: the count is
    checked first, so none of these (invalid) items is looked at."""
    with pytest.raises(ValidationError) as refused:
        Listed.model_validate({"items": ["not an item"] * 120_000})
    [error] = refused.value.errors()
    assert error["loc"] == ("items",) and "at most 10 items are accepted, not 120000" in error["msg"]
    with pytest.raises(ValidationError) as parts:
        Listed.model_validate({"items": [{"content": [1, 2, 3]}, {"content": [4, 5]}]})
    assert "at most 4 content parts are accepted in all the items, not 5" in parts.value.errors()[0]["msg"]
    assert len(Listed.model_validate({"items": [{"stream": True}] * 10}).items) == 10


def test_metadata_is_held_to_openais_bounds():
    """20 responses with ~290,000 metadata pairs each grew a service by 309 MB."""
    assert Body.model_validate({"metadata": {"k" * 64: "v" * 512}}).metadata == {"k" * 64: "v" * 512}
    for metadata in ({str(i): "" for i in range(17)}, {"k" * 65: ""}, {"k": "v" * 513}, {"k": 1}):
        with pytest.raises(ValidationError) as refused:
            Body.model_validate({"metadata": metadata})
        assert refused.value.errors()[0]["loc"][0] == "metadata"
