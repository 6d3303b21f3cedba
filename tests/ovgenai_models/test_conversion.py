"""The optimum-intel task a checkpoint is exported with, and the failures of transformers' and the Hub's calls
said as the model's problem (gated, unknown, unreachable, an unsupported architecture). The conversions
themselves: system/test_export.py and system/test_hub.py."""

from __future__ import annotations

import json

import pytest

from ovgenai_models import conversion
from ovgenai_models.conversion import VISION_TASK, is_local, text_task
from ovgenai_models.errors import ExportError


def test_the_task_follows_the_checkpoint_s_configuration(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava", "vision_config": {}, "text_config": {}}))
    assert text_task(tmp_path) == VISION_TASK
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert text_task(tmp_path) == "text-generation-with-past"
    (tmp_path / "config.json").write_text("not json")
    assert text_task(tmp_path) == "text-generation-with-past"


def hub_error(name: str) -> Exception:
    """An error of huggingface_hub's class `name`, as raised under the exporter's own error."""
    cause = type(name, (OSError,), {})("the Hub said no")
    try:
        raise RuntimeError("could not load the model") from cause
    except RuntimeError as error:
        return error


@pytest.mark.parametrize(("error", "says"), [
    (hub_error("GatedRepoError"), "is gated or private"),
    (hub_error("RepositoryNotFoundError"), "the Hugging Face Hub has no model of that id"),
    (hub_error("LocalEntryNotFoundError"), "no network, or a wrong id"),
])
def test_a_hub_failure_is_said_by_its_class(error, says):
    assert conversion._is_fetch_failure(error)
    assert says in str(conversion._fetch_error("owner/model", error))


def test_only_network_and_hub_failures_are_fetch_failures():
    assert not conversion._is_fetch_failure(ValueError("a bad config"))
    assert conversion._is_fetch_failure(ConnectionError("refused"))


@pytest.mark.parametrize("error", [KeyError("mamba"), ValueError("Unrecognized configuration class"),
                                   ValueError("this architecture is not supported")])
def test_an_unsupported_architecture_is_named(error):
    with pytest.raises(ExportError, match="an architecture the exporter does not support"):
        conversion._raise_unsupported("owner/model", error)


def test_another_value_error_is_left_as_it_is():
    conversion._raise_unsupported("owner/model", ValueError("out of memory"))  # raises nothing


def test_a_source_is_local_when_it_exists(tmp_path):
    assert is_local(str(tmp_path)) and not is_local("owner/model-that-is-no-folder")
