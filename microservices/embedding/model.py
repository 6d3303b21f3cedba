"""Loading the embedding (and reranking) pipelines with the pooling and normalization the model declares."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ovgenai_common.names import EMBEDDING_CONFIG
from ovgenai_common.openvino_threads import prime_tokenizer_outputs


@dataclass(frozen=True)
class EmbeddingModelInfo:
    name: str
    pooling: str  # "mean" | "cls" | "last_token"
    normalize: bool
    max_length: int
    dimensions: int | None


def read_model_info(folder: Path, served_name: str | None) -> EmbeddingModelInfo:
    config: dict[str, Any] = {}
    path = folder / EMBEDDING_CONFIG
    if path.is_file():
        config = json.loads(path.read_text(encoding="utf-8"))
    return EmbeddingModelInfo(
        name=served_name or config.get("name") or folder.name,
        pooling=config.get("pooling", "mean"),
        normalize=bool(config.get("normalize", True)),
        max_length=int(config.get("max_length", 512)),
        dimensions=config.get("dimensions"),
    )


def load_embedding_pipeline(
    folder: Path, device: str, info: EmbeddingModelInfo, max_length: int, properties: dict[str, Any] | None = None
):
    import openvino_genai

    pooling = {"mean": "MEAN", "cls": "CLS", "last_token": "LAST_TOKEN"}[info.pooling]
    config = openvino_genai.TextEmbeddingPipeline.Config()
    config.pooling_type = getattr(openvino_genai.TextEmbeddingPipeline.PoolingType, pooling)
    config.normalize = info.normalize
    config.max_length = max_length
    return openvino_genai.TextEmbeddingPipeline(str(folder), device, config, **(properties or {}))


def load_rerank_pipeline(folder: Path, device: str, max_length: int, properties: dict[str, Any] | None = None):
    import openvino_genai

    config = openvino_genai.TextRerankPipeline.Config()
    config.max_length = max_length
    config.top_n = 1_000_000  # the service applies top_n itself
    return openvino_genai.TextRerankPipeline(str(folder), device, config, **(properties or {}))


def load_tokenizer(folder: Path):
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(folder))
    prime_tokenizer_outputs(tokenizer)  # before request threads count tokens (ovgenai_common/openvino_threads.py)
    return tokenizer
