"""What an export writes besides the model, read from the checkpoint: a vision-language model's image settings, an
encoder's pooling and prompts, the engine options in graph.pbtxt; and the export tools asked for by name where they
are missing. The exports themselves: system/test_export.py."""

from __future__ import annotations

import json
import sys

import pytest

from ovgenai_models.errors import ExportToolsMissing
from ovgenai_models.export import (
    TextGenerationOptions,
    _graph_options,
    _write_image_settings,
    copy_prompts,
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


def test_the_checkpoint_s_prompts_are_copied_beside_the_ir(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir(), target.mkdir()
    copy_prompts(source, target)  # none: nothing written
    assert not (target / "config_sentence_transformers.json").exists()
    (source / "config_sentence_transformers.json").write_text('{"prompts": {"query": "query: "}}')
    copy_prompts(source, target)
    assert json.loads((target / "config_sentence_transformers.json").read_text())["prompts"] == {"query": "query: "}


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
    message = str(missing.value)
    assert "nncf is missing" in message and "`make export-tools`" in message
    assert "scripts/export_tools.sh --install" in message and "PyTorch's CPU index" in message
    assert "pip install -e" not in message  # PyPI's torch is the CUDA build: several GB


def test_in_the_models_image_the_missing_tools_name_the_image_that_has_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "nncf", None)
    monkeypatch.setenv("OVGENAI_EXPORT_IMAGE", "models-export")  # as the models image sets it
    with pytest.raises(ExportToolsMissing) as missing:
        require_export_stack("owner/checkpoint")
    message = str(missing.value)
    assert "the models-export image" in message and "-f compose.export.yaml" in message
    assert "models.prepare.exportTools=true" in message and "make export-tools" not in message


def test_the_export_tool_writes_ovms_switch_into_the_graph():
    graph = graph_pbtxt(_graph_options(TextGenerationOptions(prompt_lookup_decoding=True), "./"))
    assert json.loads(parse_graph_options(graph)["plugin_config"]) == {"prompt_lookup": True}
    assert "plugin_config" not in parse_graph_options(graph_pbtxt(_graph_options(TextGenerationOptions(), "./")))


def test_a_full_disk_while_writing_a_model_says_how_much_it_needs_and_where(tmp_path, monkeypatch):
    import errno
    import shutil
    from collections import namedtuple

    from ovgenai_models import export
    from ovgenai_models.errors import ExportError

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**10, 10**10 - 12 * 10**6, 12 * 10**6))
    target = tmp_path / "repo" / "org" / "model"
    with pytest.raises(ExportError) as error, export.staged(target, overwrite=False, needs=90 * 10**6) as tmp:
        (tmp / "openvino_model.bin").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")
    message = str(error.value)
    assert f"The disk ran out of space while writing '{target}'" in message
    assert "It needs about 90 MB on the disk of" in message and "12 MB are free there" in message
    assert "HF_HOME" in message and not (tmp_path / "repo").exists()  # nothing half-written left


def test_openvino_s_own_write_error_on_a_full_disk_is_said_as_one(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    from ovgenai_models import export
    from ovgenai_models.errors import ExportError

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**10, 10**10, 0))
    with pytest.raises(ExportError, match="ran out of space"), export.staged(tmp_path / "m", overwrite=False):
        raise RuntimeError("Exception from src/core/src/pass/serialize.cpp: Can't write the file")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**10, 0, 10**10))
    with pytest.raises(RuntimeError, match="serialize"), export.staged(tmp_path / "m", overwrite=False):
        raise RuntimeError("Exception from src/core/src/pass/serialize.cpp")  # a disk with room: as it was
