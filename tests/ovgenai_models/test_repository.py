"""The repository format as the backend reads it: an exported vision-language model's folder is one model, not a
repository of several."""

from __future__ import annotations

from ovgenai_models.repository import is_vision_model, language_model_xml, model_file, repository_config


def test_an_exported_vision_model_folder_is_a_model_not_a_repository(tmp_path):
    for name in ("config.json", "openvino_language_model.xml", "openvino_vision_embeddings_model.xml"):
        (tmp_path / name).write_text("{}")
    assert repository_config(tmp_path) is None and model_file(tmp_path) == tmp_path
    assert is_vision_model(tmp_path) and language_model_xml(tmp_path).name == "openvino_language_model.xml"
