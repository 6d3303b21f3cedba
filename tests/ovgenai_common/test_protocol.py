"""The base of every service's OpenAI request models: values strictly typed, unknown fields kept only to be named in
a 400, and bodies documented as closed (the fuzzer's findings, kept as tests)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ovgenai_common.errors import APIError
from ovgenai_common.protocol import OpenAIModel, StreamOptions


class Body(OpenAIModel):
    stream: bool = False
    stream_options: StreamOptions | None = None


def test_values_of_another_type_are_refused():
    for body in ('{"stream": 0.0}', '{"stream": "true"}', '{"stream_options": {"include_usage": "yes"}}'):
        with pytest.raises(ValidationError):
            Body.model_validate_json(body)


def test_unknown_fields_are_named_in_a_400_and_the_ignored_ones_pass():
    Body.model_validate_json('{"user": "u", "metadata": {}}').refuse_unknown_fields()
    with pytest.raises(APIError) as refused:
        Body.model_validate_json('{"best_of_all": 1, "user": "u"}').refuse_unknown_fields()
    assert refused.value.param == "best_of_all"


def test_bodies_are_documented_as_closed():
    schema = Body.model_json_schema()
    assert schema["additionalProperties"] is False
    assert "user" in schema["properties"]  # accepted and ignored, so documented
