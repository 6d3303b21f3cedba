"""Weights compressed at load (engine/contract/weights.py, VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS): refused at start
without NNCF unless a compressed copy is cached, the copy found again by the model's path and modification time, a GGUF
model loaded as it is; a GGUF draft converted to IR once. NNCF and the GGUF reader are not run here (stood in for)."""

from __future__ import annotations

import os
import sys

import pytest

from ovgenai_server.engine.contract.weights import (
    NNCF_MISSING,
    _cached_copy,
    compressed_model,
    gguf_ir,
    loadable_path,
    quantization_missing,
)


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "openvino_model.xml").write_text("<net/>")
    return folder


@pytest.fixture
def without_nncf(monkeypatch):
    monkeypatch.setitem(sys.modules, "nncf", None)  # as in an installation without it


@pytest.mark.usefixtures("without_nncf")
def test_nothing_is_missing_unless_an_ir_models_weights_are_to_be_compressed(model, tmp_path):
    assert quantization_missing(model, False, tmp_path) is None
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert quantization_missing(gguf, True, tmp_path) is None
    assert quantization_missing(tmp_path / "not-a-model", True, tmp_path) is None  # the loader says what it lacks


@pytest.mark.usefixtures("without_nncf")
def test_without_nncf_compression_is_refused_at_start_saying_what_to_do(model, tmp_path):
    assert quantization_missing(model, True, tmp_path / "cache") == NNCF_MISSING
    assert "pip install nncf" in NNCF_MISSING and "--weight-format int8|int4" in NNCF_MISSING
    with pytest.raises(RuntimeError, match="needs NNCF"):
        compressed_model(model, tmp_path / "cache")


def _cached(model, cache_dir, weights: str):
    """The copy an earlier start left, where the next one looks for it."""
    copy = _cached_copy(model, cache_dir, weights)
    copy.mkdir(parents=True)
    (copy / "openvino_model.xml").write_text("<compressed/>")
    return copy


@pytest.mark.usefixtures("without_nncf")
def test_a_cached_copy_is_served_without_nncf(model, tmp_path):
    cache = tmp_path / "cache"
    copy = _cached(model, cache, "int4")
    assert quantization_missing(model, True, cache, "int4") is None
    assert compressed_model(model, cache, "int4") == copy == loadable_path(model, True, cache, "int4")
    assert quantization_missing(model, True, cache, "int8") == NNCF_MISSING  # another precision: another copy


@pytest.mark.usefixtures("without_nncf")
def test_a_changed_model_is_compressed_again(model, tmp_path):
    cache = tmp_path / "cache"
    _cached(model, cache, "int8")
    stat = (model / "openvino_model.xml").stat()
    os.utime(model / "openvino_model.xml", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert quantization_missing(model, True, cache) == NNCF_MISSING


@pytest.mark.usefixtures("without_nncf")
def test_a_model_is_loaded_as_it_is_unless_asked_and_a_gguf_always(model, tmp_path):
    assert loadable_path(model, False, tmp_path) == model
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert loadable_path(gguf, True, tmp_path) == gguf


def test_a_gguf_draft_is_converted_once_and_again_when_the_file_changes(tmp_path, monkeypatch):
    converted = []

    def gguf_to_ir(source, folder):
        converted.append(source)
        (folder / "openvino_model.xml").write_text("<net/>")

    monkeypatch.setattr("ovgenai_models.export.gguf_to_ir", gguf_to_ir)
    gguf = tmp_path / "draft.gguf"
    gguf.write_bytes(b"GGUF")
    cache = tmp_path / "cache"
    first = gguf_ir(gguf, cache)
    assert (first / "openvino_model.xml").is_file() and first.parent == cache / "gguf-ir"
    assert gguf_ir(gguf, cache) == first and len(converted) == 1
    os.utime(gguf, ns=(gguf.stat().st_atime_ns, gguf.stat().st_mtime_ns + 10**9))
    assert gguf_ir(gguf, cache) != first and len(converted) == 2


def test_a_failed_conversion_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    def gguf_to_ir(_source, folder):
        (folder / "partial.bin").write_bytes(b"x")
        raise RuntimeError("unsupported tensor type")

    monkeypatch.setattr("ovgenai_models.export.gguf_to_ir", gguf_to_ir)
    gguf = tmp_path / "draft.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(RuntimeError, match="unsupported"):
        gguf_ir(gguf, tmp_path / "cache")
    assert list((tmp_path / "cache" / "gguf-ir").iterdir()) == []
