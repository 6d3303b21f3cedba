"""The served models (models/registry.py): the registry a request's `model` field finds them in (the one model by default, a
400 without a name among several, a 404 for an unknown one), and a model loaded on openvino_genai, whose facts come
from its spec and its files (the real tokenizer: system)."""

from __future__ import annotations

import asyncio

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.models.registry import ModelRegistry, ModelStatus, load_openvino_model
from ovgenai_server.tools.calls import detect_tool_format
from tests.support.fake_engine import FakeRuntime, fake_model
from tests.support.servers import MODELS


def registry(*names: str) -> ModelRegistry:
    return ModelRegistry({name: fake_model(name=name) for name in names})


def test_one_model_is_the_default():
    served = registry("only")
    assert served.named(None).name == "only" and served.named("").name == "only"
    assert served.named("only") is served.get("only")


def test_without_a_name_among_several_is_a_400_listing_them():
    with pytest.raises(APIError) as refused:
        registry("a", "b").named(None)
    assert refused.value.kind is ErrorKind.INVALID_REQUEST and refused.value.param == "model"
    assert "served models: a, b" in refused.value.message


def test_an_unknown_model_is_a_404_listing_those_served():
    with pytest.raises(APIError) as refused:
        registry("a", "b").named("c")
    assert refused.value.kind is ErrorKind.NOT_FOUND and refused.value.code == "model_not_found"
    assert "The model 'c' does not exist; served models: a, b." == refused.value.message
    assert registry("a").get("c") is None


def test_a_model_loading_failed_or_asleep_is_said_so_and_an_asleep_one_is_woken():
    models = registry("served")
    models.statuses = {"loading": ModelStatus("LOADING", "Loading model"),
                       "failed": ModelStatus("FAILED", "cannot load: bad tokenizer"),
                       "asleep": ModelStatus("UNLOADED", "Unloaded while idle")}
    for name, words in (("loading", "Loading"), ("failed", "bad tokenizer"), ("asleep", "idle")):
        with pytest.raises(APIError) as refused:
            models.named(name)
        assert refused.value.kind is ErrorKind.UNAVAILABLE and words in refused.value.message
    woken = []

    async def wake(name):
        woken.append(name)

    models.wake = wake
    for name in ("served", "loading", "asleep"):
        asyncio.run(models.awake(name))
    assert woken == ["asleep"]
    models.add(fake_model(name="asleep"))
    assert "asleep" not in models.statuses and models.remove("asleep") is not None and models.get("asleep") is None


def test_models_are_added_as_they_load_and_listed_in_that_order():
    served = ModelRegistry()
    assert len(served) == 0 and served.names() == []
    first, second = FakeRuntime(), FakeRuntime()
    served.add(fake_model(first, name="first"))
    served.add(fake_model(second, name="second"))
    assert served.names() == ["first", "second"] and len(served) == 2
    assert served.runtimes() == [("first", first), ("second", second)]
    for _ in served:  # a snapshot: a model may load while the registry is read
        served.add(fake_model(name="third"))
    assert [model.name for model in served] == ["first", "second", "third"]


def _discard(runtime) -> None:
    """A runtime never started, closed."""
    asyncio.run(runtime.close())
