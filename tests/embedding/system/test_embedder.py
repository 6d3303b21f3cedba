"""The embedder gives the vectors openvino-genai's TextEmbeddingPipeline gives, bit for bit, on the default
embedding model: each pooling, normalized or not, in f32 and bf16, with a text cut to the model's length among
shorter ones; its counts are each text's whole length in the model's tokens."""

from __future__ import annotations

import numpy as np
import pytest

from microservices.embedding.embedder import Embedder
from microservices.embedding.model import load_tokenizer, token_counts
from tests.support.servers import MODELS

MODEL = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
TEXTS = ["what is a lighthouse?", "lighthouse keepers count the ships that pass the rocks at night " * 4, "x",
         "word " * 100]  # the last one over MAX_LENGTH
MAX_LENGTH = 32


def pipeline_vectors(pooling: str, normalize: bool, hint: str) -> np.ndarray:
    import openvino_genai

    config = openvino_genai.TextEmbeddingPipeline.Config()
    config.pooling_type = getattr(openvino_genai.TextEmbeddingPipeline.PoolingType, pooling.upper())
    config.normalize, config.max_length = normalize, MAX_LENGTH
    pipeline = openvino_genai.TextEmbeddingPipeline(str(MODEL), "CPU", config, INFERENCE_PRECISION_HINT=hint)
    return np.asarray(pipeline.embed_documents(TEXTS), dtype=np.float32)


@pytest.mark.parametrize("hint", ["f32", "bf16"])
@pytest.mark.parametrize(("pooling", "normalize"), [("mean", True), ("mean", False), ("cls", True),
                                                    ("last_token", False)])
def test_the_vectors_are_openvino_genai_s_pipeline_s(pooling, normalize, hint):
    tokenizer = load_tokenizer(MODEL)
    embedder = Embedder(MODEL, "CPU", pooling, normalize, MAX_LENGTH, {"INFERENCE_PRECISION_HINT": hint}, tokenizer)
    expected = pipeline_vectors(pooling, normalize, hint)
    counts, vectors = embedder.embed_counted(TEXTS, None)
    assert np.array_equal(vectors, expected)
    assert np.array_equal(embedder.embed(TEXTS), expected)
    assert counts == token_counts(load_tokenizer(MODEL), TEXTS) and counts[-1] > MAX_LENGTH
