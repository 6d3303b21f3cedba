"""The embedding model (embedder.py: with the pooling and normalization it declares), the reranking pipeline and
their tokenizer: loaded, and called, in the model process (model_process.py)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ovgenai_common.cpu import InferencePrecision, default_properties, log_computed_precision
from ovgenai_common.names import EMBEDDING_CONFIG, SENTENCE_TRANSFORMERS_CONFIG
from ovgenai_common.openvino_threads import prime_tokenizer_outputs
from ovgenai_common.tokens import vocabulary_size

from .embedder import Embedder
from .fast_tokenizer import load_fast_tokenizer
from .precision import faster_precision, worth_timing
from .prompts import Prompts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddingModelInfo:
    name: str
    pooling: str  # "mean" | "cls" | "last_token"
    normalize: bool
    max_length: int
    dimensions: int | None
    prompts: Prompts = field(default_factory=Prompts)
    matryoshka: bool = False  # its vectors may be cut to their first dimensions (trained so)
    matryoshka_dimensions: tuple[int, ...] = ()  # the sizes it was trained at, where it says (empty: any)


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def read_model_info(folder: Path, served_name: str | None) -> EmbeddingModelInfo:
    config = _json(folder / EMBEDDING_CONFIG)
    # Matryoshka as vLLM reads it from the Hugging Face config: is_matryoshka, or the sizes it was trained at.
    hf_config = _json(folder / "config.json")
    matryoshka_dimensions = tuple(int(d) for d in hf_config.get("matryoshka_dimensions") or ())
    return EmbeddingModelInfo(
        name=served_name or config.get("name") or folder.name,
        pooling=config.get("pooling", "mean"),
        normalize=bool(config.get("normalize", True)),
        max_length=int(config.get("max_length", 512)),
        dimensions=config.get("dimensions"),
        prompts=read_prompts(folder),
        matryoshka=bool(matryoshka_dimensions) or bool(hf_config.get("is_matryoshka", False)),
        matryoshka_dimensions=matryoshka_dimensions,
    )


def read_prompts(folder: Path) -> Prompts:
    """The model's own prompts, as sentence-transformers saved them beside it (none where it did not)."""
    path = folder / SENTENCE_TRANSFORMERS_CONFIG
    config = _json(path)
    texts = {str(name): str(text) for name, text in (config.get("prompts") or {}).items() if text is not None}
    try:
        return Prompts(texts, config.get("default_prompt_name"))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error


@dataclass(frozen=True)
class ModelConfig:
    """What the model process loads (it crosses to that process, so values only)."""

    folder: Path
    device: str
    info: EmbeddingModelInfo
    max_tokens: int
    plugin_config: dict[str, Any]  # OpenVINO properties as given
    precision: InferencePrecision = "auto"
    reranker: Path | None = None
    query_tokens: int | None = None  # the query shape's length (embedder.py); 0: none, None: the device's
    batch_tokens: int | None = None  # the tokens one inference takes at most (None: a call's, whatever they are)

    def with_hint(self, hint: str | None) -> ModelConfig:
        """The same model in the precision a first start chose: a restart loads it without timing again."""
        if not hint:
            return self
        return replace(self, plugin_config={**self.plugin_config, "INFERENCE_PRECISION_HINT": hint})


@dataclass(frozen=True)
class ModelFacts:
    """What the API process learns from the loaded model."""

    dimensions: int
    vocabulary: int | None  # token ids the tokenizer knows (None: it cannot say)
    hint: str | None  # the precision hint the models were compiled with


class Models:
    """The tokenizer, embedder and reranker of one `ModelConfig`, loaded. Each method is one call of the model
    process."""

    def __init__(self, config: ModelConfig):
        self.tokenizer = load_tokenizer(config.folder)  # the tokenizer lane's; the embedder has its own
        self.batch_tokens = config.batch_tokens
        properties = default_properties(config.device, config.plugin_config, config.precision)
        timed = worth_timing(config.device, config.precision, config.plugin_config)
        logger.info("loading %s on %s with OpenVINO properties %s%s", config.folder, config.device, properties,
                    " (timing bf16 against f32 first)" if timed else "")
        if timed:
            hint, self.embedder, rates = faster_precision(
                lambda hint: load_embedder(config, {**properties, "INFERENCE_PRECISION_HINT": hint}),
                lambda embedder, texts: embedder.embed(texts))
            properties["INFERENCE_PRECISION_HINT"] = hint
            if rates:  # else one precision failed, and the warning said so
                logger.info("embedding: timed on this CPU: %s; serving %s",
                            ", ".join(f"{h} {rate:.0f} texts/s" for h, rate in rates.items()), hint)
        else:
            self.embedder = load_embedder(config, properties)
        log_computed_precision("embedding", config.device, properties)
        self.reranker = None
        if config.reranker:
            self.reranker = load_rerank_pipeline(config.reranker, config.device, config.max_tokens, properties)
        served = properties.get("INFERENCE_PRECISION_HINT")
        dimensions = config.info.dimensions or self.embedder.embed(["dimension probe"]).shape[1]
        self.facts = ModelFacts(int(dimensions), vocabulary_size(self.tokenizer), str(served) if served else None)

    def embed(self, texts: list[str], limits: list[int | None],
              cuts: list[int | None] | None = None) -> tuple[list[int], np.ndarray | None]:
        """Each text's tokens and a float32 row a text (an array crosses between processes whole), from one encoding:
        a text over its limit is not embedded, one over its cut is cut to it (Embedder.embed_counted), and a call of
        more tokens than a batch runs in several inferences."""
        return self.embedder.embed_counted(texts, limits, self.batch_tokens, cuts)

    def decode(self, token_ids: list[list[int]]) -> list[str]:
        return [self.tokenizer.decode(ids) for ids in token_ids]

    def rerank(self, query: str, documents: list[str]) -> list[tuple[int, float]]:
        if self.reranker is None:
            raise LookupError("no reranker is loaded")
        return [(int(index), float(score)) for index, score in self.reranker.rerank(query, documents)]


def load_embedder(config: ModelConfig, properties: dict[str, Any]) -> Embedder:
    tokenizer = load_tokenizer(config.folder)
    fast_tokenizer = load_fast_tokenizer(config.folder, tokenizer)
    return Embedder(config.folder, config.device, config.info.pooling, config.info.normalize, config.max_tokens,
                    properties, tokenizer, fast_tokenizer, query_tokens=config.query_tokens)


def load_rerank_pipeline(folder: Path, device: str, max_length: int, properties: dict[str, Any] | None = None):
    import openvino_genai

    config = openvino_genai.TextRerankPipeline.Config()
    config.max_length = max_length
    config.top_n = 1_000_000  # the service applies top_n itself
    return openvino_genai.TextRerankPipeline(str(folder), device, config, **(properties or {}))


def load_tokenizer(folder: Path):
    import openvino_genai

    # One thread: a query's tokens take ~0.3 ms either way, but a second thread spins ~1.4 ms after each call, taking a
    # core from the model and the API process; a 256 K-character slice takes 13 ms instead of 11 (bench/results.md).
    tokenizer = openvino_genai.Tokenizer(str(folder), INFERENCE_NUM_THREADS=1)
    prime_tokenizer_outputs(tokenizer)  # before request threads count tokens (ovgenai_common/openvino_threads.py)
    return tokenizer
