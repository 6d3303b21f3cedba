"""The embedder gives the vectors openvino-genai's TextEmbeddingPipeline gives on the default embedding model, to
rounding (it pads its inputs' length to a multiple of 8; the pipeline does not): each pooling, normalized or not, in
f32 and bf16, with a text cut to the model's length among shorter ones and shorter ones alone (queries: the fast
tokenizer and the query shape); its counts are each text's whole length in the model's tokens. The model's two
tokenizers give the same tokens for texts of many scripts."""

from __future__ import annotations

import numpy as np
import pytest

from ovgenai_common.cpu import computed_precision
from ovgenai_services.embedding.embedder import Embedder, matrix_product_precisions
from ovgenai_services.embedding.fast_tokenizer import FastTokenizer, load_fast_tokenizer
from ovgenai_services.embedding.model import load_tokenizer
from tests.support.servers import MODELS

MODEL = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
TEXTS = ["what is a lighthouse?", "lighthouse keepers count the ships that pass the rocks at night " * 4, "x",
         "word " * 100]  # the last one over MAX_LENGTH
MAX_LENGTH = 32


ROUNDING = {"f32": 1e-5, "bf16": 2e-3}  # the largest difference in one coordinate


def pipeline_vectors(pooling: str, normalize: bool, hint: str, texts: list[str]) -> np.ndarray:
    import openvino_genai

    config = openvino_genai.TextEmbeddingPipeline.Config()
    config.pooling_type = getattr(openvino_genai.TextEmbeddingPipeline.PoolingType, pooling.upper())
    config.normalize, config.max_length = normalize, MAX_LENGTH
    pipeline = openvino_genai.TextEmbeddingPipeline(str(MODEL), "CPU", config, INFERENCE_PRECISION_HINT=hint)
    return np.asarray(pipeline.embed_documents(texts), dtype=np.float32)


@pytest.mark.parametrize("hint", ["f32", "bf16"])
@pytest.mark.parametrize(("pooling", "normalize"), [("mean", True), ("mean", False), ("cls", True),
                                                    ("last_token", False)])
def test_the_vectors_are_openvino_genai_s_pipeline_s(pooling, normalize, hint):
    tokenizer = load_tokenizer(MODEL)
    embedder = Embedder(MODEL, "CPU", pooling, normalize, MAX_LENGTH, {"INFERENCE_PRECISION_HINT": hint},
                        tokenizer, load_fast_tokenizer(MODEL, tokenizer))
    assert embedder.fast_tokenizer is not None
    # the query shape's rule: where the CPU computes in bf16 (an AVX2-only CPU computes a bf16 hint in f32)
    assert (embedder.query_request is not None) == (computed_precision("CPU", hint) == "bf16")
    alone = load_tokenizer(MODEL)  # each text encoded by itself: its tokens, no padding
    # a batch at the model's length; queries (the fast tokenizer, the query shape): 7 tokens alone, 3 alone
    for texts in (TEXTS, TEXTS[:1], TEXTS[2:3]):
        expected = pipeline_vectors(pooling, normalize, hint, texts)
        counts, vectors = embedder.embed_counted(texts, None)
        assert np.abs(vectors - expected).max() <= ROUNDING[hint]
        assert np.array_equal(embedder.embed(texts), vectors)
        assert counts == [alone.encode(text).input_ids.data.shape[1] for text in texts]
    assert counts == [3] and embedder.embed_counted(TEXTS, None)[0][-1] > MAX_LENGTH


def test_in_f32_the_matrix_products_run_on_f32_weights_not_fp16_widened_at_each_call():
    tokenizer = load_tokenizer(MODEL)
    embedder = Embedder(MODEL, "CPU", "mean", True, MAX_LENGTH, {"INFERENCE_PRECISION_HINT": "f32"}, tokenizer)
    compiled = embedder.request.get_compiled_model()
    assert matrix_product_precisions(compiled) == {"f32"}  # the export's fp16 weights ran as "f16" layers


def test_the_fast_tokenizer_gives_the_openvino_tokenizer_s_ids_in_many_scripts():
    import random

    rng = random.Random(0)
    words = [*" ".join(TEXTS[:2]).split(), "Lighthouse", "don't", "1998", "naïve", "Ärger", "東京", "😀", "ﬁ", "İ",
             "ß", "\u00a0", "Ελλάδα", "мир", "مرحبا", "नमस्ते", "!?", "'s"]
    texts = [" ".join(rng.choices(words, k=rng.randint(1, 60))) for _ in range(300)]
    tokenizer = load_tokenizer(MODEL)
    fast = FastTokenizer(MODEL / "tokenizer.json")
    for text in texts:
        assert fast.encode([text])[0][0].tolist() == tokenizer.encode([text]).input_ids.data[0].tolist(), text
