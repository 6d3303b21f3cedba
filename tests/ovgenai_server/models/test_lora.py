"""LoRA adapters served as models of their own (models/lora.py): vLLM's forms of --lora-modules, an adapter's layers read
from its safetensors header and checked against the model's weight names, fused or static by the weights' type,
and each adapter's spec beside its base model's. The adapter changing answers: system/test_lora.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ovgenai_models.repository import ModelRepositoryError, register
from ovgenai_server.models.lora import LoraModule, adapter_layers, parse_lora_modules
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings

LAYERS = ("model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.v_proj")


def _ir(folder: Path, weight_type: str = "f32", layers=LAYERS) -> Path:
    """An IR's xml as optimum-intel names its weights (no weights needed: only names and types are read)."""
    folder.mkdir(parents=True)
    constants = "".join(f'<layer id="{i}" name="self.{layer}.weight" type="Const" version="opset1">'
                        f'<data element_type="{weight_type}" shape="64, 64" offset="0" size="1"/></layer>'
                        for i, layer in enumerate(layers))
    (folder / "openvino_model.xml").write_text(f'<net name="Model0"><layers>{constants}</layers></net>')
    return folder


def _adapter(folder: Path, layers=LAYERS, prefix: str = "base_model.model.") -> Path:
    """adapter_model.safetensors as PEFT saves it (only its header is read here)."""
    folder.mkdir(parents=True)
    header = {f"{prefix}{layer}.lora_{part}.weight": {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]}
              for layer in layers for part in "AB"}
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    (folder / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4)
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 1}')
    return folder


def test_vllm_forms_of_lora_modules():
    assert parse_lora_modules("sql=/a/sql  chat=/a/chat") == [LoraModule("sql", Path("/a/sql")),
                                                              LoraModule("chat", Path("/a/chat"))]
    assert parse_lora_modules('{"name": "sql", "path": "/a", "base_model_name": "m"}') == [
        LoraModule("sql", Path("/a"), "m")]
    assert parse_lora_modules(["sql=/a", '{"name": "b", "path": "/b"}']) == [LoraModule("sql", Path("/a")),
                                                                             LoraModule("b", Path("/b"))]
    assert parse_lora_modules("") == [] and parse_lora_modules(None) == []


def test_the_layers_an_adapter_changes_are_read_from_its_header(tmp_path):
    file = _adapter(tmp_path / "a") / "adapter_model.safetensors"
    assert adapter_layers(file) == set(LAYERS)
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 4)
    with pytest.raises(ModelRepositoryError, match="not a readable safetensors"):
        adapter_layers(tmp_path / "bad.safetensors")


def _specs(tmp_path, modules, model=None):
    return load_model_specs(BackendSettings(model=str(model or tmp_path / "m"), served_model_name="base",
                                            lora_modules=modules, autotune=False))


def test_each_adapter_is_its_base_models_engine_under_its_own_name(tmp_path):
    _ir(tmp_path / "m")
    adapter = _adapter(tmp_path / "sql")
    base, sql = _specs(tmp_path, f"sql={adapter}")
    assert (base.name, base.lora) == ("base", None)
    assert (sql.name, sql.path, sql.lora.base, sql.lora.fuse) == ("sql", base.path, "base", True)
    assert sql.lora.file == adapter / "adapter_model.safetensors"
    assert json.loads(sql.describe())["lora"]["fuse"] is True


def test_compressed_weights_take_the_adapter_beside_them(tmp_path):
    _ir(tmp_path / "m", weight_type="u8")
    _, sql = _specs(tmp_path, f"sql={_adapter(tmp_path / 'sql')}")
    assert sql.lora.fuse is False  # openvino-genai fuses no compressed weight: MODE_STATIC


@pytest.mark.parametrize(("make", "named"), [
    (lambda tmp: tmp / "missing", "is not a PEFT adapter folder"),
    (lambda tmp: _adapter(tmp / "other", layers=("model.layers.0.mlp.up_proj",)), "1 of its 1 layers match no"),
    (lambda tmp: _adapter(tmp / "empty", layers=()), "holds no LoRA tensors"),
])
def test_an_adapter_that_cannot_apply_is_refused_at_start_by_name(tmp_path, make, named):
    _ir(tmp_path / "m")
    with pytest.raises(ModelRepositoryError, match=named) as refused:
        _specs(tmp_path, f"sql={make(tmp_path)}")
    assert "'sql'" in str(refused.value)


def test_a_gguf_model_and_a_taken_name_are_refused(tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    adapter = _adapter(tmp_path / "sql")
    with pytest.raises(ModelRepositoryError, match="a .gguf model has no weight names"):
        _specs(tmp_path, f"sql={adapter}", model=tmp_path / "model.gguf")
    _ir(tmp_path / "m")
    with pytest.raises(ModelRepositoryError, match="already served"):
        _specs(tmp_path, f"base={adapter}")


def test_in_a_repository_an_adapter_names_its_base_model(tmp_path):
    for name in ("a", "b"):
        _ir(tmp_path / name)
        register(tmp_path / "config.json", name, name, llm=True)
    adapter = _adapter(tmp_path / "sql")
    settings = {"model": str(tmp_path), "autotune": False}
    with pytest.raises(ModelRepositoryError, match="base_model_name"):
        load_model_specs(BackendSettings(**settings, lora_modules=f"sql={adapter}"))
    with pytest.raises(ModelRepositoryError, match="no served model is named 'c'"):
        load_model_specs(BackendSettings(**settings, lora_modules=json.dumps(
            {"name": "sql", "path": str(adapter), "base_model_name": "c"})))
    specs = load_model_specs(BackendSettings(**settings, lora_modules=json.dumps(
        {"name": "sql", "path": str(adapter), "base_model_name": "b"})))
    assert [(spec.name, spec.lora and spec.lora.base) for spec in specs] == [("a", None), ("b", None), ("sql", "b")]
