"""Pull and serve (models/source.py): which model is fetched before serving, and the settings that then serve what was
prepared, under the source's name. The preparation itself (ovgenai_models) is stood in for."""

from __future__ import annotations

import pytest
from pydantic_settings import CliApp

from ovgenai_models import handoff
from ovgenai_models.errors import ExportError
from ovgenai_server.cli import boolean_settings, translate
from ovgenai_server.settings import BackendSettings
from ovgenai_server.models.source import SourceError, with_source_prepared


def settings(*argv: str) -> BackendSettings:
    return CliApp.run(BackendSettings, cli_args=translate(argv, boolean_settings(BackendSettings)))


@pytest.fixture
def prepared(monkeypatch) -> list[tuple]:
    """What was asked of the preparation (it prepares nothing)."""
    calls: list[tuple] = []
    monkeypatch.setattr(handoff, "prepare_models_with_tools", lambda *args: calls.append(args))
    return calls


def test_a_model_already_here_is_served_as_it_is(prepared, tmp_path):
    given = BackendSettings(model=str(tmp_path))
    assert with_source_prepared(given) is given and not prepared


def test_a_source_is_prepared_in_the_repository_and_served_under_its_id(prepared, tmp_path):
    served = with_source_prepared(BackendSettings(source_model="OpenVINO/m-int4-ov", model_repository_path=tmp_path,
                                                  revision="v2"))
    assert (served.model, served.served_model_name) == (str(tmp_path / "OpenVINO/m-int4-ov"), "OpenVINO/m-int4-ov")
    [(repository, source, revision, *_)] = prepared
    assert (repository, source, revision) == (tmp_path, "OpenVINO/m-int4-ov", "v2")


def test_a_draft_named_by_its_hub_id_is_prepared_or_found_in_the_repository(prepared, tmp_path):
    served = with_source_prepared(BackendSettings(model=str(tmp_path), draft_model="owner/small",
                                                  model_repository_path=tmp_path / "repo", revision="v2"))
    assert served.draft_model == tmp_path / "repo" / "owner/small" and served.model == str(tmp_path)
    [(repository, source, revision, *_)] = prepared
    assert (repository, source, revision) == (tmp_path / "repo", "owner/small", None)  # the target's revision only
    local = with_source_prepared(BackendSettings(model=str(tmp_path), draft_model=str(tmp_path)))
    assert local.draft_model == tmp_path and len(prepared) == 1  # a path is served as it is


def test_the_repository_defaults_to_the_cache_and_a_chosen_name_is_kept(prepared, tmp_path):
    served = with_source_prepared(BackendSettings(model="o/m", cache_dir=tmp_path, served_model_name="mine"))
    assert (served.model, served.served_model_name) == (str(tmp_path / "models" / "o/m"), "mine")
    assert prepared[0][0] == tmp_path / "models"


def test_a_source_that_cannot_be_prepared_is_a_source_error_with_the_reason(monkeypatch, tmp_path):
    def fail(*_args):
        raise ExportError("the Hub says no")

    monkeypatch.setattr(handoff, "prepare_models_with_tools", fail)
    with pytest.raises(SourceError, match="the Hub says no"):
        with_source_prepared(BackendSettings(source_model="o/m", cache_dir=tmp_path))


@pytest.mark.parametrize(("argv", "expected"), [
    (("serve", "Qwen/Qwen2.5-0.5B-Instruct"), "Qwen/Qwen2.5-0.5B-Instruct"),  # vLLM: a Hub id as the model
    (("--source_model", "o/m"), "o/m"),
    (("--model", "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"), "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"),
    (("--model", "./no/such/folder"), None),  # a path that does not exist: the loader says so
    (("--model", "."), None),  # an existing folder is served as it is
])
def test_which_model_is_fetched_before_serving(argv, expected):
    from ovgenai_server.models.source import source_of

    assert source_of(settings(*argv)) == expected
