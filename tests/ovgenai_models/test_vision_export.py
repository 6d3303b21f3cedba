"""A vision-language checkpoint is exported as one (optimum-intel's image-text-to-text task), with the image
settings where openvino-genai reads them."""

from __future__ import annotations

import json

from ovgenai_models.export import VISION_TASK, _write_image_settings, text_task
from ovgenai_models.repository import is_vision_model, language_model_xml, model_file, repository_config


def test_the_task_follows_the_checkpoint_s_configuration(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava", "vision_config": {}, "text_config": {}}))
    assert text_task(tmp_path) == VISION_TASK
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert text_task(tmp_path) == "text-generation-with-past"


def test_image_settings_come_from_transformers_5_processor_config(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir(), target.mkdir()
    image_processor = {"crop_size": {"height": 30, "width": 30}, "image_mean": [0.5, 0.5, 0.5]}
    (source / "processor_config.json").write_text(json.dumps({"image_processor": image_processor, "patch_size": 6}))
    _write_image_settings(source, target)
    assert json.loads((target / "preprocessor_config.json").read_text()) == image_processor


def test_an_exported_vision_model_folder_is_a_model_not_a_repository(tmp_path):
    for name in ("config.json", "openvino_language_model.xml", "openvino_vision_embeddings_model.xml"):
        (tmp_path / name).write_text("{}")
    assert repository_config(tmp_path) is None and model_file(tmp_path) == tmp_path
    assert is_vision_model(tmp_path) and language_model_xml(tmp_path).name == "openvino_language_model.xml"
