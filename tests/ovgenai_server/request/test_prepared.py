"""A request ready for its model's engine (request/prepared.py): its prompt's ids, its echo as a completion shows it,
and its generation on the model's runtime."""

from __future__ import annotations

import pytest

from ovgenai_server.engine.contract.types import GenerationParams, TextPrompt, TokenPrompt
from ovgenai_server.models.registry import ServedModel
from ovgenai_server.request.fair_share import FairShare
from ovgenai_server.request.prepared import Prepared
from tests.support.fake_engine import FakeRuntime, fake_model


def prepared(model: ServedModel, prompt, params: GenerationParams, **fields) -> Prepared:
    """Prepared and admitted for one client."""
    prep = Prepared(model, prompt, params, **fields)
    prep.ticket = FairShare(model.runtime, 8, 4).admit("address:127.0.0.1", prep.places)
    return prep


def test_the_echo_is_the_prompt_as_sent_or_its_ids_decoded():
    model = fake_model()
    params = GenerationParams(max_new_tokens=1)
    assert prepared(model, TokenPrompt([3, 1]), params, text="one two").echo_text() == "one two"
    assert prepared(model, TokenPrompt([3, 1]), params).echo_text() == "xxx x"  # sent as ids: the fake decodes "x"s
    assert prepared(model, TokenPrompt([3, 1]), params, text="").echo_text() == ""  # an empty text is still the text


def test_the_prompt_ids_are_the_prompts_whatever_its_kind():
    model = fake_model()
    params = GenerationParams(max_new_tokens=1)
    assert prepared(model, TokenPrompt([5, 6]), params).prompt_ids == [5, 6]
    assert prepared(model, TextPrompt("<ov_genai_image_0> hi", [7, 8, 9]), params).prompt_ids == [7, 8, 9]


async def test_it_generates_on_its_models_runtime_with_its_parameters():
    runtime = FakeRuntime(pieces=["a", "b"])
    params = GenerationParams(max_new_tokens=5, seed=3)
    prep = prepared(fake_model(runtime), TokenPrompt([1, 2]), params)
    texts = [delta.text async for output in prep.generate() for delta in output.deltas]
    assert texts == ["a", "b"] and runtime.calls == [([1, 2], params)]
    assert not prep.output.active  # a plain answer unless the request said otherwise
    assert prep.admitted.share.running == 0  # out of the engine: its turn ended


def test_a_request_runs_only_once_admitted():
    with pytest.raises(RuntimeError, match="admitted"):
        Prepared(fake_model(), TokenPrompt([1]), GenerationParams(max_new_tokens=1)).generate().__anext__().send(None)
