"""What an export writes besides the model, read from the checkpoint: a vision-language model's image settings,
an encoder's pooling, the engine options in graph.pbtxt; and the export tools asked for by name where they are
missing. The exports themselves: system/test_export.py."""

from __future__ import annotations

import json
import sys

import pytest

from ovgenai_models.errors import ExportToolsMissing
from ovgenai_models.export import (
    TextGenerationOptions,
    _graph_options,
    _write_image_settings,
    folder_size,
    pooling_of,
    require_export_stack,
)
from ovgenai_models.repository import graph_pbtxt, parse_graph_options


def test_image_settings_come_from_transformers_5_processor_config(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir(), target.mkdir()
    image_processor = {"crop_size": {"height": 30, "width": 30}, "image_mean": [0.5, 0.5, 0.5]}
    (source / "processor_config.json").write_text(json.dumps({"image_processor": image_processor, "patch_size": 6}))
    _write_image_settings(source, target)
    assert json.loads((target / "preprocessor_config.json").read_text()) == image_processor


def test_a_preprocessor_config_is_copied_as_it_is(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir(), target.mkdir()
    (source / "preprocessor_config.json").write_text('{"size": 30}')
    _write_image_settings(source, target)
    assert (target / "preprocessor_config.json").read_text() == '{"size": 30}'


@pytest.mark.parametrize(("modules", "pooling_config", "expected"), [
    (None, None, ("mean", False)),
    ([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"},
      {"type": "sentence_transformers.models.Normalize"}], {"pooling_mode_mean_tokens": True}, ("mean", True)),
    ([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}], {"pooling_mode_cls_token": True},
     ("cls", False)),
    ([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}], {"pooling_mode_lasttoken": True},
     ("last_token", False)),
])
def test_pooling_and_normalization_come_from_the_sentence_transformers_modules(tmp_path, modules, pooling_config,
                                                                                expected):
    if modules is not None:
        (tmp_path / "modules.json").write_text(json.dumps(modules))
    if pooling_config is not None:
        (tmp_path / "1_Pooling").mkdir()
        (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
    assert pooling_of(tmp_path) == expected


def test_graph_options_carry_only_what_was_given():
    options = _graph_options(TextGenerationOptions(max_num_seqs=8, prompt_lookup_decoding=True), "./")
    assert options["max_num_seqs"] == 8 and json.loads(options["plugin_config"]) == {"prompt_lookup": True}
    unset = _graph_options(TextGenerationOptions(), "./")
    assert unset["plugin_config"] is None and unset["cache_size"] is None and unset["models_path"] == "./"


def test_folder_size_counts_every_file_below(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"1234")
    (tmp_path / "y.xml").write_bytes(b"12")
    assert folder_size(tmp_path) == 6


def test_missing_export_tools_are_named_with_how_to_install_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "nncf", None)  # as in an installation without the export extra
    with pytest.raises(ExportToolsMissing) as missing:
        require_export_stack("owner/checkpoint")
    assert "nncf is missing" in str(missing.value) and "pip install -e '.[export]'" in str(missing.value)


def test_the_export_tool_writes_ovms_switch_into_the_graph():
    graph = graph_pbtxt(_graph_options(TextGenerationOptions(prompt_lookup_decoding=True), "./"))
    assert json.loads(parse_graph_options(graph)["plugin_config"]) == {"prompt_lookup": True}
    assert "plugin_config" not in parse_graph_options(graph_pbtxt(_graph_options(TextGenerationOptions(), "./")))
