"""The loopback Hub (tests/support/hub.py) and the small models it serves, made once per session for the tests that
pull from it (test_hub.py, test_pull.py, test_prepare.py), and one repository pulled from it without the export
tools."""

from __future__ import annotations

import pytest

from ovgenai_models.bert_ir import write_bert_ir
from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir
from tests.ovgenai_models.system.hub_models import models_cli, prepare
from tests.support.hub import LoopbackHub
from tests.support.tiny_models import build_tiny_bert_encoder, build_tiny_cross_encoder, build_tiny_llama


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    """The models the hub serves: a tiny Llama as a Transformers checkpoint and exported to OpenVINO IR, a BERT
    encoder (also as sentence-transformers publishes one, with its IR in openvino/) and a cross-encoder, and the
    default model's GGUF file."""
    root = tmp_path_factory.mktemp("made")
    llama = build_tiny_llama(root / "tiny-llama")
    exported = models_cli("text_generation", "--source_model", str(llama), "--model_name", "tiny-ir",
                          "--model_repository_path", str(root / "exported"), "--weight-format", "int8", env={})
    assert exported.returncode == 0, exported.stderr[-2000:]
    ir = {p.name: p for p in (root / "exported" / "tiny-ir").iterdir() if p.name != "graph.pbtxt"}
    (root / "onnx").mkdir()
    (root / "onnx" / "model.onnx").write_bytes(b"not for export")
    (root / "flax_model.msgpack").write_bytes(b"not for export")
    checkpoint = {p.name: p for p in llama.iterdir()}
    checkpoint |= {"onnx/model.onnx": root / "onnx" / "model.onnx", "flax_model.msgpack": root / "flax_model.msgpack"}
    other_quantization = root / "SmolLM2-135M-Instruct.Q8_0.gguf"
    other_quantization.write_bytes(b"GGUF never downloaded")
    gguf = {LLM_FILE: package_dir(LLM_PACKAGE) / LLM_FILE, other_quantization.name: other_quantization}
    bert = build_tiny_bert_encoder(root / "bert")
    # As sentence-transformers publishes an encoder: the checkpoint, and its IR in openvino/ beside it.
    (root / "openvino").mkdir()
    write_bert_ir(bert, root / "openvino", compress_to_fp16=False)
    published = {p.name: p for p in bert.iterdir() if p.is_file()} | {
        "1_Pooling/config.json": bert / "1_Pooling/config.json",
        "openvino/openvino_model.xml": root / "openvino/openvino_model.xml",
        "openvino/openvino_model.bin": root / "openvino/openvino_model.bin"}
    return {"ir": ir, "checkpoint": checkpoint, "gguf": gguf, "bert": bert, "published": published,
            "cross": build_tiny_cross_encoder(root / "cross")}


@pytest.fixture(scope="session")
def hub(made):
    with LoopbackHub() as hub:
        hub.add("test-org/tiny-llama-int8-ov", made["ir"])
        hub.add("test-org/tiny-llama", made["checkpoint"])
        hub.add("test-org/SmolLM2-135M-Instruct-GGUF", made["gguf"])
        hub.add("test-org/gated-llama-ov", made["ir"], gated=True)
        hub.add("test-org/tiny-st", made["published"])
        yield hub


@pytest.fixture(scope="session")
def pulled(tmp_path_factory, hub):
    """One repository with the IR repository and one GGUF file of the GGUF repository pulled into it, each without
    the export tools; the GGUF file's first transfer breaks off mid-way."""
    repository = tmp_path_factory.mktemp("pulled")
    env = hub.env(tmp_path_factory.mktemp("hf-home"))
    # huggingface_hub writes what it receives in blocks of 10 MiB, and resumes from the last whole block.
    cut = 45 * 1024 * 1024
    hub.cut_first_transfer("test-org/SmolLM2-135M-Instruct-GGUF", LLM_FILE, cut)
    ir = prepare(repository, {**env, "LLM_MODEL_ID": "test-org/tiny-llama-int8-ov"}, "--embedding", "none",
                 without_export_tools=True)
    assert ir.returncode == 0, ir.stdout[-2000:] + ir.stderr[-3000:]
    gguf = prepare(repository, {**env, "LLM_MODEL_ID": "test-org/SmolLM2-135M-Instruct-GGUF:Q4_1"}, "--embedding",
                   "none", without_export_tools=True)
    assert gguf.returncode == 0, gguf.stdout[-2000:] + gguf.stderr[-3000:]
    return {"repository": repository, "env": env, "cut": cut}
