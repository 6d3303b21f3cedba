"""What /v1/models and /v1/config say of each model: served ones with their engine's state (and autotune's choice),
the others loading, failed with the reason, or unloaded while idle; a served model whose new version failed says
why."""

from __future__ import annotations

from ovgenai_server.api.model_status import config_status, model_list
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.models.registry import ModelStatus
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state


def state_with_others():
    state = fake_state(fake_model(FakeRuntime(), name="served"),
                       fake_model(FakeRuntime(state=EngineState.LOADING), name="restarting"))
    state.models.statuses = {"new": ModelStatus("LOADING", "Loading model"),
                             "broken": ModelStatus("FAILED", "cannot load: bad tokenizer")}
    return state


def test_the_model_list_gives_each_models_state():
    listed = {card["id"]: card["status"] for card in model_list(state_with_others())["data"]}
    assert listed == {"served": {"value": "AVAILABLE"}, "restarting": {"value": "LOADING"},
                      "new": {"value": "LOADING", "message": "Loading model"},
                      "broken": {"value": "FAILED", "message": "cannot load: bad tokenizer"}}


def test_the_config_says_why_a_model_is_not_available():
    config = config_status(state_with_others(), {"served": "the new version failed: out of memory"})
    status = {name: entry["model_version_status"][0] for name, entry in config.items()}
    assert status["served"]["state"] == "AVAILABLE" and status["served"]["status"]["error_code"] == "OK"
    assert status["served"]["status"]["error_message"] == "the new version failed: out of memory"
    assert status["broken"] == {"version": "1", "state": "FAILED", "status": {
        "error_code": "FAILED_PRECONDITION", "error_message": "cannot load: bad tokenizer"}}
    assert status["new"]["state"] == "LOADING" and status["restarting"]["status"]["error_code"] == "UNAVAILABLE"


def test_an_adapter_is_listed_as_vllm_lists_one_with_its_base_as_parent():
    state = fake_state(fake_model(name="base", source="/models/base"),
                       fake_model(name="sql", source="/adapters/sql/adapter_model.safetensors", parent="base"))
    cards = {card["id"]: card for card in model_list(state)["data"]}
    assert cards["base"]["root"] == "base" and "parent" not in cards["base"]
    assert (cards["sql"]["root"], cards["sql"]["parent"]) == ("/adapters/sql/adapter_model.safetensors", "base")
