"""What pull.py makes of each source, on local folders and a Hub stood in for (its listing and downloads answered
from tmp_path): a .gguf file, a GGUF folder and a quantization of a GGUF repository exported, an IR folder installed
as it is (its own graph.pbtxt, registered; a Hub download hard-linked, never written into), a checkpoint refused
before its download without the export tools, an encoder's pooling described, and what cannot be served refused by
name. The real Hub client on a loopback Hub: system/test_pull.py."""

from __future__ import annotations

import json
import os

import pytest

from ovgenai_models import hub, pull
from ovgenai_models.errors import ExportError, ExportToolsMissing
from ovgenai_models.export import TextGenerationOptions
from ovgenai_models.repository import parse_graph_options, read_config

OPTIONS = TextGenerationOptions(prompt_lookup_decoding=True)
IR_FILES = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml")


def ir_folder(folder, *extra: str):
    folder.mkdir(parents=True, exist_ok=True)
    for name in (*IR_FILES, *extra):
        (folder / name).write_text(f"{name} of {folder.name}")
    return folder


@pytest.fixture
def exported(monkeypatch):
    """export_text_generation's calls: (source, name, model_id)."""
    calls = []

    def export(source, name, repository, _options, _overwrite, _progress, model_id=None):
        calls.append((source, name, model_id))
        return repository / name

    monkeypatch.setattr(pull, "export_text_generation", export)
    return calls


@pytest.fixture
def the_hub(monkeypatch, tmp_path):
    """A Hub whose repositories are folders under tmp_path/hub: listed, and downloaded as they are."""
    root = tmp_path / "hub"
    downloads = []
    monkeypatch.setattr(hub, "use_opea_token", lambda: None)
    monkeypatch.setattr(hub, "list_files", lambda repo_id, revision: hub.Listing(
        repo_id, revision, tuple(str(p.relative_to(root / repo_id)) for p in (root / repo_id).rglob("*"))))

    def snapshot(listing, ignore=None, allow_patterns=None):
        downloads.append((listing.repo_id, ignore) if allow_patterns is None
                         else (listing.repo_id, ignore, allow_patterns))
        return root / listing.repo_id

    def file(listing, filename):
        downloads.append((listing.repo_id, filename))
        return root / listing.repo_id / filename

    monkeypatch.setattr(hub, "download_snapshot", snapshot)
    monkeypatch.setattr(hub, "download_file", file)
    return root, downloads


def test_a_local_gguf_file_or_a_folder_of_one_is_exported_and_other_files_refused(tmp_path, exported):
    gguf = tmp_path / "m.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    pull.pull_text_generation(str(gguf), "m", tmp_path / "repo", OPTIONS)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "only.gguf").write_bytes(b"GGUF")
    pull.pull_text_generation(str(tmp_path / "folder"), "f", tmp_path / "repo", OPTIONS)
    assert exported == [(str(gguf), "m", None), (str(tmp_path / "folder" / "only.gguf"), "f", None)]
    (tmp_path / "folder" / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(ExportError, match="several GGUF files: only.gguf, other.gguf"):
        pull.pull_text_generation(str(tmp_path / "folder"), "f", tmp_path / "repo", OPTIONS)
    (tmp_path / "weights.safetensors").write_bytes(b"x")
    with pytest.raises(ExportError, match="is a file but no .gguf"):
        pull.pull_text_generation(str(tmp_path / "weights.safetensors"), "w", tmp_path / "repo", OPTIONS)


def test_a_local_ir_folder_is_installed_as_it_is_with_its_own_graph_and_registered(tmp_path):
    source = ir_folder(tmp_path / "ir", "graph.pbtxt")
    repository = tmp_path / "repo"
    target = pull.pull_text_generation(str(source), "org/model", repository, OPTIONS)
    assert target == repository / "org/model"
    assert all((target / name).read_text() == f"{name} of ir" for name in IR_FILES)
    graph = parse_graph_options((target / "graph.pbtxt").read_text())
    assert graph["models_path"] == "./" and json.loads(graph["plugin_config"]) == {"prompt_lookup": True}
    assert (source / "graph.pbtxt").read_text() == "graph.pbtxt of ir"  # someone else's layout, left alone there
    assert read_config(repository / "config.json")["mediapipe_config_list"] == [
        {"name": "org/model", "base_path": "org/model"}]


def test_a_hub_ir_download_is_hard_linked_and_the_graph_replaced_not_written_through(tmp_path, the_hub):
    root, downloads = the_hub
    cached = ir_folder(root / "org/model-ov", "graph.pbtxt")
    target = pull.pull_text_generation("org/model-ov", "org/model-ov", tmp_path / "repo", OPTIONS)
    assert downloads == [("org/model-ov", None)]
    assert os.stat(target / "openvino_model.bin").st_ino == os.stat(cached / "openvino_model.bin").st_ino
    assert (cached / "graph.pbtxt").read_text() == "graph.pbtxt of model-ov"  # the cache's copy as it was
    assert "models_path" in (target / "graph.pbtxt").read_text()


def test_one_gguf_of_a_hub_repository_by_its_quantization(tmp_path, the_hub, exported):
    root, downloads = the_hub
    (root / "org/m-GGUF").mkdir(parents=True)
    for name in ("m.Q4_K_M.gguf", "m.Q8_0.gguf", "mmproj-m.gguf", "README.md"):
        (root / "org/m-GGUF" / name).write_bytes(b"GGUF")
    pull.pull_text_generation("org/m-GGUF:Q8_0", "org/m-GGUF:Q8_0", tmp_path / "repo", OPTIONS)
    assert downloads == [("org/m-GGUF", "m.Q8_0.gguf")]
    assert exported == [(str(root / "org/m-GGUF" / "m.Q8_0.gguf"), "org/m-GGUF:Q8_0", None)]


def test_a_checkpoint_is_refused_before_its_download_without_the_export_tools(tmp_path, the_hub, monkeypatch,
                                                                                exported):
    root, downloads = the_hub
    (root / "org/ckpt").mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        (root / "org/ckpt" / name).write_text("{}")

    def missing(source):
        raise ExportToolsMissing(f"'{source}' is a Transformers checkpoint")

    monkeypatch.setattr(pull, "require_export_stack", missing)
    with pytest.raises(ExportToolsMissing, match="'org/ckpt' is a Transformers checkpoint"):
        pull.pull_text_generation("org/ckpt", "org/ckpt", tmp_path / "repo", OPTIONS)
    assert downloads == [] and exported == []
    monkeypatch.setattr(pull, "require_export_stack", lambda _source: None)
    pull.pull_text_generation("org/ckpt", "org/ckpt", tmp_path / "repo", OPTIONS)
    [(repo_id, ignored)] = downloads
    assert "pytorch_model*.bin" in ignored and "*.gguf" in ignored  # its safetensors weights, nothing else
    assert exported == [(str(root / "org/ckpt"), "org/ckpt", "org/ckpt")]


def test_a_gguf_repository_is_no_encoder_and_no_quantization_of_a_repository_without_gguf(tmp_path, the_hub):
    root, _ = the_hub
    (root / "org/m-GGUF").mkdir(parents=True)
    (root / "org/m-GGUF" / "m.Q4_0.gguf").write_bytes(b"GGUF")
    with pytest.raises(ExportError, match="serve text generation only"):
        pull.pull_encoder("embeddings", "org/m-GGUF", "e", tmp_path / "repo", None)
    ir_folder(root / "org/ir")
    with pytest.raises(ExportError, match="'org/ir' holds no GGUF file"):
        pull.pull_text_generation("org/ir:Q4_0", "x", tmp_path / "repo", OPTIONS)


def test_an_ir_embedder_is_described_from_its_sentence_transformers_files(tmp_path):
    source = ir_folder(tmp_path / "encoder")
    (source / "config.json").write_text(json.dumps({"max_position_embeddings": 128, "hidden_size": 64}))
    (source / "modules.json").write_text(json.dumps([
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (source / "1_Pooling").mkdir()
    (source / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    repository = tmp_path / "repo"
    target = pull.pull_encoder("embeddings", str(source), "org/encoder", repository, None)
    info = json.loads((target / "embedding_config.json").read_text())
    assert (info["name"], info["pooling"], info["normalize"], info["max_length"], info["dimensions"]) == (
        "org/encoder", "cls", True, 128, 64)
    assert read_config(repository / "config.json")["model_config_list"] == [
        {"config": {"name": "org/encoder", "base_path": "org/encoder"}}]
    cross = pull.pull_encoder("rerank", str(ir_folder(tmp_path / "cross")), "org/cross", repository, None)
    assert not (cross / "embedding_config.json").exists()  # a reranker has no pooling to describe


def sentence_transformers_repository(folder, *, with_tokenizer_ir: bool = True):
    """A sentence-transformers repository as the Hub holds one: the checkpoint, its pooling, and its encoder's IR in
    openvino/ (with a quantized variant beside it)."""
    folder.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "model.safetensors", "onnx/model.onnx", "openvino/openvino_model.xml",
                 "openvino/openvino_model.bin", "openvino/openvino_model_qint8_quantized.xml", "1_Pooling/config.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"{name} of {folder.name}")
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 256, "hidden_size": 384}))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (folder / "modules.json").write_text(json.dumps([
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    if with_tokenizer_ir:
        for name in hub.TOKENIZER_IRS:
            (folder / name).write_text(name)
    return folder


def test_a_repository_s_own_openvino_ir_is_used_as_it_is_without_the_export_tools(tmp_path, the_hub, monkeypatch):
    root, downloads = the_hub
    sentence_transformers_repository(root / "org/st-model")
    monkeypatch.setattr(pull, "require_export_stack", lambda _source: pytest.fail("the export tools were asked for"))
    target = pull.pull_encoder("embeddings", "org/st-model", "org/st-model", tmp_path / "repo", None)
    [(repo_id, ignored, allowed)] = downloads
    assert repo_id == "org/st-model" and ignored is None and allowed == hub.PUBLISHED_IR_PATTERNS
    assert (target / "openvino_model.xml").read_text() == "openvino/openvino_model.xml of st-model"
    assert (target / "openvino_model.bin").is_file() and not (target / "openvino").exists()
    info = json.loads((target / "embedding_config.json").read_text())
    assert (info["pooling"], info["normalize"], info["dimensions"], info["weight_format"]) == (
        "mean", True, 384, "published")
    # The Hub's cache keeps its layout: the IR was moved in the repository's copy only.
    assert (root / "org/st-model/openvino/openvino_model.xml").is_file()


def test_the_published_ir_download_leaves_the_checkpoint_and_other_formats_behind():
    from huggingface_hub.utils import filter_repo_objects

    files = ["config.json", "tokenizer.json", "vocab.txt", "sentencepiece.bpe.model", "modules.json",
             "1_Pooling/config.json", "model.safetensors", "pytorch_model.bin", "onnx/model.onnx",
             "openvino/openvino_model.xml", "openvino/openvino_model.bin",
             "openvino/openvino_model_qint8_quantized.xml", "openvino/openvino_model_qint8_quantized.bin"]
    kept = set(filter_repo_objects(files, allow_patterns=hub.PUBLISHED_IR_PATTERNS))
    assert kept == {"config.json", "tokenizer.json", "vocab.txt", "sentencepiece.bpe.model", "modules.json",
                    "1_Pooling/config.json", "openvino/openvino_model.xml", "openvino/openvino_model.bin"}
    assert hub.Listing("o/m", None, tuple(files)).publishes_encoder_ir
    assert not hub.Listing("o/m", None, ("config.json", "model.safetensors")).publishes_encoder_ir


def test_a_local_sentence_transformers_folder_gives_its_ir_without_its_other_formats(tmp_path, monkeypatch):
    source = sentence_transformers_repository(tmp_path / "local-st")
    monkeypatch.setattr(pull, "require_export_stack", lambda _source: pytest.fail("the export tools were asked for"))
    target = pull.pull_encoder("embeddings", str(source), "local-st", tmp_path / "repo", None)
    assert (target / "openvino_model.xml").is_file() and not (target / "model.safetensors").exists()
    assert not (target / "onnx").exists() and (source / "openvino" / "openvino_model.xml").is_file()
