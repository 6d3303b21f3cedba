"""The answers, each in its API's shape: OpenAI's /v1/embeddings, TEI's /embed and /rerank, and the Cohere-style
/v1/rerank; vectors as floats or base64, cut to the dimensions asked for (a Matryoshka model's), normalized where TEI's
`normalize` asks for it. Pure: results in, JSON-ready values out."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

Ranked = list[tuple[int, float, str]]  # (index, score, document), best first


def openai_embeddings(vectors: Sequence, prompt_tokens: int, model: str, encoding_format: str) -> dict[str, Any]:
    data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, encoding_format)}
            for i, v in enumerate(vectors)]
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def shortened(vectors: Sequence, dimensions: int | None, normalized: bool) -> Sequence:
    """Each vector's first `dimensions` values, at unit length again where the model gives unit vectors, as vLLM and
    TEI cut a Matryoshka model's; the vectors as they are where `dimensions` is None."""
    if dimensions is None:
        return vectors
    cut = np.asarray(vectors, dtype=np.float32)[:, :dimensions]
    if normalized:
        norms = np.linalg.norm(cut, axis=1, keepdims=True)
        cut = cut / np.where(norms > 0, norms, 1)
    return list(cut)


def tei_embeddings(vectors: Sequence, normalize: bool = False) -> list[Any]:
    """One vector per input; `normalize`: to unit length here (the model does not)."""
    return [encode_vector(unit(v) if normalize else v, "float") for v in vectors]


def ranked(scores: list[tuple[int, float]], documents: list[str], top_n: int | None) -> Ranked:
    """The reranker's (index, score) pairs best first, `top_n` of them, each with its document."""
    best = sorted(scores, key=lambda pair: pair[1], reverse=True)[: top_n or len(scores)]
    return [(index, float(score), documents[index]) for index, score in best]


def rerank(results: Ranked, model: str, with_text: bool) -> dict[str, Any]:
    """The Cohere-style /v1/rerank answer."""
    return {"model": model, "results": [
        {"index": index, "relevance_score": score, **({"document": {"text": text}} if with_text else {})}
        for index, score, text in results
    ]}


def tei_rerank(results: Ranked, with_text: bool) -> list[dict[str, Any]]:
    return [{"index": index, "score": score, **({"text": text} if with_text else {})}
            for index, score, text in results]


def unit(vector) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def encode_vector(vector, encoding_format: str):
    array = np.asarray(vector, dtype=np.float32)
    if encoding_format == "base64":
        return base64.b64encode(array.astype("<f4").tobytes()).decode()
    return array.tolist()
