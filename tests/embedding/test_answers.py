"""Each API's answer from the service's results: OpenAI's list with usage, in floats or little-endian float32
base64; TEI's bare vectors, normalized on request; rerank's results best first, top_n of them, with or without their
documents, in Cohere's and TEI's shapes."""

from __future__ import annotations

import base64
import struct

import numpy as np
import pytest

from ovgenai_services.embedding import answers


def test_openai_s_list_with_usage_in_floats_or_base64():
    vectors = [np.array([3.0, 4.0], np.float32), [0.5, -1.0]]
    answer = answers.openai_embeddings(vectors, 7, "m", "float")
    assert answer == {"object": "list", "model": "m", "usage": {"prompt_tokens": 7, "total_tokens": 7}, "data": [
        {"object": "embedding", "index": 0, "embedding": [3.0, 4.0]},
        {"object": "embedding", "index": 1, "embedding": [0.5, -1.0]}]}
    packed = answers.openai_embeddings(vectors, 7, "m", "base64")["data"][1]["embedding"]
    assert struct.unpack("<2f", base64.b64decode(packed)) == (0.5, -1.0)


def test_vectors_cut_to_their_first_dimensions_and_unit_again_where_the_model_normalizes():
    vectors = [np.array([0.6, 0.8, 0.0], np.float32), np.array([0.0, 0.0, 1.0], np.float32)]
    assert answers.shortened(vectors, None, True) is vectors
    assert [v.tolist() for v in answers.shortened(vectors, 1, True)] == [[1.0], [0.0]]  # a zero stays zero
    assert [v.tolist() for v in answers.shortened(vectors, 2, False)] == [pytest.approx([0.6, 0.8]), [0.0, 0.0]]


def test_tei_s_vectors_normalized_only_when_asked():
    assert answers.tei_embeddings([np.array([3.0, 4.0])]) == [[3.0, 4.0]]
    assert answers.tei_embeddings([[3.0, 4.0], [0.0, 0.0]], normalize=True) == [pytest.approx([0.6, 0.8]), [0, 0]]


def test_ranked_best_first_top_n_with_their_documents():
    scores = [(0, 0.125), (1, np.float32(0.75)), (2, 0.5)]  # a score may come as a numpy float
    assert answers.ranked(scores, ["a", "b", "c"], None) == [(1, 0.75, "b"), (2, 0.5, "c"), (0, 0.125, "a")]
    top = answers.ranked(scores, ["a", "b", "c"], 2)
    assert top == [(1, 0.75, "b"), (2, 0.5, "c")] and type(top[0][1]) is float


def test_rerank_in_cohere_s_and_tei_s_shapes():
    results = [(1, 0.9, "b"), (0, 0.1, "a")]
    assert answers.rerank(results, "r", with_text=True) == {"model": "r", "results": [
        {"index": 1, "relevance_score": 0.9, "document": {"text": "b"}},
        {"index": 0, "relevance_score": 0.1, "document": {"text": "a"}}]}
    assert answers.rerank(results, "r", with_text=False)["results"][0] == {"index": 1, "relevance_score": 0.9}
    assert answers.tei_rerank(results, with_text=True) == [{"index": 1, "score": 0.9, "text": "b"},
                                                           {"index": 0, "score": 0.1, "text": "a"}]
    assert answers.tei_rerank(results, with_text=False) == [{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}]
