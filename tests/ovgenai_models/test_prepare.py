"""`prepare` (prepare.py) with the pulls recorded instead of run: each configured model prepared once and then left
alone, prepared again when its source, revision or GGUF file changes, a model prepared by hand kept; the defaults
from their packages; "none" and an unnamed reranker skipped; the environment's names, compose's empty values and
OPEA's token name. Pulling from a Hub: system/test_prepare.py."""

from __future__ import annotations

import json
import os

import pytest

from ovgenai_models import prepare as prepare_module
from ovgenai_models import pull
from ovgenai_models.defaults import EMBEDDING_NAME, LLM_NAME
from ovgenai_models.prepare import (
    SOURCE_RECORD,
    PrepareSettings,
    prepare,
    prepare_encoder_model,
    prepare_llm_model,
    prepare_models,
)
from ovgenai_models.repository import register, registered

NAMES = ("LLM_MODEL_ID", "LLM_MODEL_REVISION", "GGUF_FILENAME", "EMBEDDING_MODEL_ID", "EMBEDDING_MODEL_REVISION",
         "RERANK_MODEL_ID", "RERANK_MODEL_REVISION", "HF_TOKEN", "HUGGINGFACEHUB_API_TOKEN")


@pytest.fixture
def pulls(monkeypatch):
    """Every pull and default preparation, recorded; a pull leaves a model registered where the real one would."""
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    done: list[tuple] = []

    def text_generation(source, name, repository, _options, overwrite, revision, gguf_filename):
        done.append(("llm", source, revision, gguf_filename, overwrite))
        (repository / name).mkdir(parents=True, exist_ok=True)
        (repository / name / "openvino_model.xml").write_text("<net/>")
        register(repository / "config.json", name, name, llm=True, overwrite=True)
        return repository / name

    def encoder(task, source, name, repository, weight_format, overwrite, revision):
        done.append((task, source, revision, weight_format, overwrite))
        (repository / name).mkdir(parents=True, exist_ok=True)
        (repository / name / "openvino_model.xml").write_text("<net/>")
        (repository / name / "embedding_config.json").write_text('{"weight_format": "fp16"}')
        return repository / name

    monkeypatch.setattr(pull, "pull_text_generation", text_generation)
    monkeypatch.setattr(pull, "pull_encoder", encoder)
    monkeypatch.setattr(prepare_module, "prepare_llm", lambda _repository: done.append(("default llm",)))
    monkeypatch.setattr(prepare_module, "prepare_embeddings", lambda _repository: done.append(("default embeddings",)))
    monkeypatch.setattr(prepare_module, "symmetric_weights", lambda _folder: 0)  # test_symmetric_weights.py
    return done


def test_a_configured_llm_is_pulled_once_then_left_alone(tmp_path, pulls, capsys):
    assert prepare_llm_model(tmp_path, "owner/model", "v1") == tmp_path / "owner/model"
    assert json.loads((tmp_path / "owner/model" / SOURCE_RECORD).read_text()) == {
        "source": "owner/model", "revision": "v1", "gguf_filename": None}
    prepare_llm_model(tmp_path, "owner/model", "v1")
    assert pulls == [("llm", "owner/model", "v1", None, True)]
    assert "owner/model: already prepared" in capsys.readouterr().out


@pytest.mark.parametrize("change", [{"revision": "v2"}, {"gguf_filename": "m.Q8_0.gguf"}])
def test_a_changed_revision_or_gguf_file_is_prepared_again(tmp_path, pulls, change):
    prepare_llm_model(tmp_path, "owner/model", "v1", "m.Q4_0.gguf")
    again = {"revision": "v1", "gguf_filename": "m.Q4_0.gguf", **change}
    prepare_llm_model(tmp_path, "owner/model", again["revision"], again["gguf_filename"])
    assert len(pulls) == 2 and pulls[1][2:4] == (again["revision"], again["gguf_filename"])


def test_a_model_prepared_by_hand_or_unregistered(tmp_path, pulls):
    folder = tmp_path / "owner/model"
    folder.mkdir(parents=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    prepare_llm_model(tmp_path, "owner/model")  # not in config.json: the server would not find it
    assert len(pulls) == 1 and registered(tmp_path / "config.json", "owner/model")
    (folder / SOURCE_RECORD).unlink()  # as a model prepared by hand, or by a version that kept no record
    prepare_llm_model(tmp_path, "owner/model", "v9")
    assert len(pulls) == 1


def test_the_defaults_come_from_their_packages_unless_a_revision_or_a_local_folder_is_named(tmp_path, pulls,
                                                                                            monkeypatch):
    prepare_llm_model(tmp_path, LLM_NAME)
    prepare_encoder_model("embeddings", tmp_path, EMBEDDING_NAME + "/")
    assert pulls == [("default llm",), ("default embeddings",)]
    prepare_llm_model(tmp_path, LLM_NAME, "main")
    assert pulls[-1] == ("llm", LLM_NAME, "main", None, True)
    local = tmp_path / "here" / LLM_NAME  # a folder that happens to be named like the default id
    local.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "here")
    prepare_llm_model(tmp_path, LLM_NAME)
    assert pulls[-1][0] == "llm"


def test_an_encoder_is_pulled_for_its_task_once(tmp_path, pulls):
    prepare_encoder_model("rerank", tmp_path, "owner/cross", "v1")
    prepare_encoder_model("rerank", tmp_path, "owner/cross", "v1")
    prepare_encoder_model("embeddings", tmp_path, "owner/encoder")
    prepare_encoder_model("embeddings", tmp_path, "owner/encoder")
    assert pulls == [("rerank", "owner/cross", "v1", None, True), ("embeddings", "owner/encoder", None, None, True)]


def test_none_skips_a_model_and_a_reranker_is_prepared_only_when_named(tmp_path, pulls):
    repository = tmp_path / "new" / "repository"
    prepare_models(repository, "none", None, None, "none", None, None, None)
    assert pulls == [] and repository.is_dir() and (repository / ".prepare.lock").exists()
    prepare_models(repository, None, None, None, "none", None, "none", None)
    assert pulls == [("default llm",)]
    prepare_models(repository, "none", None, None, None, None, "owner/cross", "v3")
    assert pulls[1:] == [("default embeddings",), ("rerank", "owner/cross", "v3", None, True)]
    prepare_models(repository, "none", None, None, "none", None, None, None, "owner/draft")  # LLM_DRAFT_MODEL_ID
    assert pulls[3:] == [("llm", "owner/draft", None, None, True)]


def test_flags_then_the_environment_then_the_defaults(tmp_path, pulls, monkeypatch):
    monkeypatch.setenv("LLM_MODEL_ID", "env/llm")
    monkeypatch.setenv("LLM_MODEL_REVISION", "r1")
    monkeypatch.setenv("EMBEDDING_MODEL_ID", "")  # compose's unset variable: the default
    monkeypatch.setenv("RERANK_MODEL_ID", "env/cross")
    prepare(tmp_path, None, None)
    assert pulls == [("llm", "env/llm", "r1", None, True), ("default embeddings",),
                     ("rerank", "env/cross", None, None, True)]
    pulls.clear()
    prepare(tmp_path, "flag/llm", "none", "none")
    assert pulls == [("llm", "flag/llm", "r1", None, True)]


def test_compose_s_empty_values_are_unset(monkeypatch):
    for name in PrepareSettings.model_fields:  # every one, so that none set elsewhere in the run leaks in
        monkeypatch.setenv(name.upper(), " ")
    assert all(value is None for value in PrepareSettings().model_dump().values())


def test_opeas_hub_token_name_is_honoured_and_hf_token_wins(monkeypatch):
    from ovgenai_models.prepare import hub_token_for_huggingface_hub, served_name

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HUGGINGFACEHUB_API_TOKEN", "hf_opea")
    hub_token_for_huggingface_hub(PrepareSettings())
    assert os.environ["HF_TOKEN"] == "hf_opea"
    monkeypatch.setenv("HF_TOKEN", "hf_own")
    hub_token_for_huggingface_hub(PrepareSettings())
    assert os.environ["HF_TOKEN"] == "hf_own"
    monkeypatch.setenv("HF_TOKEN", "")  # compose passes an unset variable as empty
    hub_token_for_huggingface_hub(PrepareSettings())
    assert os.environ["HF_TOKEN"] == "hf_opea"
    assert served_name("meta-llama/Meta-Llama-3-8B-Instruct/") == "meta-llama/Meta-Llama-3-8B-Instruct"


def test_serve_only_lists_the_configured_llm_alone_beside_its_draft(tmp_path, pulls, capsys):
    """compose's models service (`prepare --serve_only`): the backend serving the repository swaps to it."""
    prepare_models(tmp_path, "owner/old", None, None, "none", None, None, None)
    prepare_models(tmp_path, "owner/new", None, None, "none", None, None, None, "owner/draft", only_llm=True)
    listed = json.loads((tmp_path / "config.json").read_text())["mediapipe_config_list"]
    assert listed == [{"name": "owner/new", "base_path": "owner/new"}]
    assert (tmp_path / "owner/old" / "openvino_model.xml").is_file()  # kept for a switch back
    assert "owner/new: the LLM the repository serves, drafted by owner/draft" in capsys.readouterr().out
    assert pulls[-1] == ("llm", "owner/draft", None, None, True)
