"""The default embedding model prepared without torch (bert_ir.py builds its encoder, openvino-tokenizers converts
its tokenizer through transformers' tokenizer classes), with torch, optimum, NNCF and sentence-transformers blocked
from import: the embedding service's embedder loads it as the service does, and its vectors agree
with sentence-transformers on PyTorch (the test venv has it) to cosine 0.9999 or better."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ovgenai_models.defaults import EMBEDDING_NAME, EMBEDDING_PACKAGE, package_dir
from ovgenai_services.embedding.model import ModelConfig, load_embedder, read_model_info
from tests.ovgenai_models.system.hub_models import blocking
from tests.support.servers import ROOT

SERVING_ONLY = ("torch", "optimum", "nncf", "sentence_transformers")
TEXTS = ["hello", "The mascot of the Zorblat festival is a purple heron named Fitch.",
         "OpenVINO runs large language models on Intel CPUs and GPUs. " * 12, "Qu'est-ce que c'est ? 3.14 — ok!"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    repository = tmp_path_factory.mktemp("repo")
    result = subprocess.run([sys.executable, "-c", blocking(SERVING_ONLY), "prepare", "--model_repository_path",
                             str(repository), "--llm", "none"], cwd=ROOT, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "OVGENAI_EXPORT_PYTHON": ""})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "no torch" in result.stdout
    return repository / EMBEDDING_NAME


def test_it_is_prepared_as_the_export_prepared_it(prepared):
    names = {p.name for p in prepared.iterdir()}
    assert {"openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml",
            "embedding_config.json", "config.json", "tokenizer.json"} <= names
    info = json.loads((prepared / "embedding_config.json").read_text())
    assert info == {"name": EMBEDDING_NAME, "pooling": "mean", "normalize": True, "max_length": 512,
                    "dimensions": 384, "weight_format": "fp16", "quant_mode": None}
    assert 40e6 < (prepared / "openvino_model.bin").stat().st_size < 50e6  # fp16 weights, as the export's


def test_the_embedding_service_s_embedder_gives_sentence_transformers_vectors(prepared):
    from sentence_transformers import SentenceTransformer

    config = ModelConfig(prepared, "CPU", read_model_info(prepared, None), 256, {})
    ours = load_embedder(config, {"INFERENCE_PRECISION_HINT": "f32"}).embed(TEXTS)
    reference = SentenceTransformer(str(package_dir(EMBEDDING_PACKAGE) / "model"), device="cpu").encode(
        TEXTS, normalize_embeddings=True)
    cosines = (ours * reference).sum(axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(reference, axis=1)
    assert ours.shape == (len(TEXTS), 384)
    assert cosines.min() >= 0.9999, cosines
