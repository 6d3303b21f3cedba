"""A Transformers checkpoint as TorchServe's MODEL_PATH (torchserve/checkpoint.py): told from OpenVINO IR and from a
model repository, exported once per checkpoint and weight format into the cache and served from there after. The
export itself is stood in for here; on a real checkpoint: system/test_checkpoint.py."""

from __future__ import annotations

import json
import os

import pytest

from ovgenai_models import export
from ovgenai_server.torchserve.checkpoint import exported, is_checkpoint


@pytest.fixture
def exports(monkeypatch) -> list[tuple]:
    """Each export asked for; it writes an IR's file where the export would."""
    calls: list[tuple] = []

    def export_text_generation(source, name, repository, options, **_kwargs):
        calls.append((source, options.weight_format))
        (repository / name).mkdir(parents=True)
        (repository / name / "openvino_model.xml").write_text("<net/>")

    monkeypatch.setattr(export, "export_text_generation", export_text_generation)
    return calls


def checkpoint_in(folder):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "model.safetensors").write_bytes(b"0")
    return folder


def test_a_config_that_is_not_a_json_object_is_no_checkpoint(tmp_path):
    folder = checkpoint_in(tmp_path / "hf")
    (folder / "config.json").write_text("{not json")
    assert not is_checkpoint(folder)
    (folder / "config.json").write_text("[]")
    assert not is_checkpoint(folder)
    assert not is_checkpoint(folder / "config.json")  # a file, not a folder


def test_a_checkpoint_is_exported_once_then_served_from_the_cache(tmp_path, exports):
    checkpoint = checkpoint_in(tmp_path / "hf")
    first = exported(checkpoint, tmp_path / "cache", "int8")
    assert (first / "openvino_model.xml").is_file() and first.is_relative_to(tmp_path / "cache" / "checkpoints")
    assert exported(checkpoint, tmp_path / "cache", "int8") == first
    assert exports == [(str(checkpoint), "int8")]


def test_another_weight_format_or_a_changed_checkpoint_is_exported_again(tmp_path, exports):
    checkpoint = checkpoint_in(tmp_path / "hf")
    int8 = exported(checkpoint, tmp_path / "cache", "int8")
    int4 = exported(checkpoint, tmp_path / "cache", "int4")
    stat = (checkpoint / "model.safetensors").stat()
    os.utime(checkpoint / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    changed = exported(checkpoint, tmp_path / "cache", "int8")
    assert len({int8, int4, changed}) == 3 and [fmt for _, fmt in exports] == ["int8", "int4", "int8"]


def test_a_transformers_checkpoint_is_told_from_ir_and_repositories(tmp_path):
    import json

    from ovgenai_server.torchserve.checkpoint import is_checkpoint, weight_format

    checkpoint, ir, repository = (tmp_path / name for name in ("hf", "ir", "repo"))
    for folder in (checkpoint, ir, repository):
        folder.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert not is_checkpoint(checkpoint)  # no weights yet
    (checkpoint / "model.safetensors").write_bytes(b"0")
    assert is_checkpoint(checkpoint)
    (ir / "config.json").write_text("{}")
    (ir / "openvino_model.xml").write_text("<net/>")
    (ir / "model.safetensors").write_bytes(b"0")
    (repository / "config.json").write_text(json.dumps({"mediapipe_config_list": []}))
    (repository / "model.safetensors").write_bytes(b"0")
    assert not is_checkpoint(ir) and not is_checkpoint(repository)
    assert [weight_format(d, q) for d, q in [("bfloat16", "none"), ("float32", "none"), ("float16", "4bit"),
                                             ("bfloat16", "8bit")]] == ["fp16", "fp32", "int4", "int8"]
