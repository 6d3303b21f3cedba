"""Embedding logic: input normalization and validation, token accounting, truncation, encoding."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.tokens import check_token_ids

from .batcher import Batcher, QueueFull
from .model import ModelConfig, read_model_info
from .model_process import ModelError, ModelProcess, ModelProcessStopped
from .protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest
from .settings import EmbeddingSettings

T = TypeVar("T")


def invalid(message: str, param: str | None = "input") -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, message, param)


def model_config(settings: EmbeddingSettings) -> ModelConfig:
    """What the model process loads; a folder without a model is refused here, before any process starts."""
    folder = Path(settings.model)
    if not (folder / "openvino_model.xml").is_file():
        raise FileNotFoundError(
            f"No OpenVINO embedding model in '{folder}'; prepare it with "
            "'python -m ovgenai_models defaults' or "
            "'python -m ovgenai_models embeddings --source_model ...'."
        )
    info = read_model_info(folder, settings.served_model_name)
    return ModelConfig(folder, settings.device, info, min(settings.max_input_tokens, info.max_length),
                       dict(settings.plugin_config), settings.inference_precision,
                       Path(settings.reranker_model) if settings.reranker_model else None, settings.query_tokens)


@dataclass
class Embedded:
    vectors: list
    prompt_tokens: int
    truncated: int


class EmbeddingService:
    """The requests' logic; the model's work runs in the model process (model_process.py), never on this one."""

    def __init__(self, settings: EmbeddingSettings, metrics, model: ModelProcess):
        self.settings = settings
        self.metrics = metrics
        self.model = model
        self.info, self.max_tokens = model.config.info, model.config.max_tokens
        self.dimensions, self.vocabulary = model.facts.dimensions, model.facts.vocabulary
        self.has_reranker = model.config.reranker is not None
        self.batcher = Batcher(
            model.embed,
            settings.max_batch_size,
            settings.max_batch_tokens,
            settings.batch_wait_ms / 1000,
            settings.max_queued_texts,
            on_batch=metrics.observe_batch,
            count_and_embed=model.embed_counted,
        )
        metrics.watch_queue(lambda: self.batcher.queued)

    @classmethod
    async def load(cls, settings: EmbeddingSettings, metrics) -> EmbeddingService:
        """The service once its model process has loaded the model."""
        model = await ModelProcess.start(model_config(settings), settings.log_level, settings.log_format)
        return cls(settings, metrics, model)

    @property
    def name(self) -> str:
        return self.info.name

    def start(self) -> None:
        self.batcher.start()

    async def close(self) -> None:
        await self.batcher.close()
        await self.model.close()

    # ---- inputs ------------------------------------------------------------------------------------------

    def inputs_of(self, value: object, field: str = "input") -> tuple[list[str], list[list[int]]]:
        """The request's texts, or its token-id inputs checked against the vocabulary (one of the two is empty).
        `field`: the request's name for it (OpenAI's `input`, TEI's `inputs`), which errors name."""
        if isinstance(value, str):
            inputs: tuple[list[str], list[list[int]]] = [value], []
        elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            inputs = [], [value]
        elif isinstance(value, list) and value and all(isinstance(v, list) for v in value):
            if any(not v or not all(isinstance(t, int) for t in v) for v in value):
                raise invalid("Token-id inputs must be non-empty lists of integers.", field)
            inputs = [], value
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            inputs = list(value), []
        elif isinstance(value, list) and not value:
            raise invalid(f"'{field}' must not be an empty list.", field)
        else:
            raise invalid(f"'{field}' must be a string, a list of strings, or token ids.", field)
        count = len(inputs[0]) + len(inputs[1])
        if count > self.settings.max_inputs_per_request:
            raise invalid(
                f"Too many inputs: {count} (at most {self.settings.max_inputs_per_request} per request).", field
            )
        for ids in inputs[1]:
            check_token_ids(ids, self.vocabulary, field)
        return inputs

    async def texts_of(self, value: object, field: str = "input") -> list[str]:
        """The request's texts, token ids decoded by the model process. Checking a large request's ids is
        Python's work: on a worker thread, so that the loop keeps its turns; a small one's takes microseconds,
        less than the thread's round trip."""
        if small_input(value):
            texts, token_ids = self.inputs_of(value, field)
        else:
            texts, token_ids = await asyncio.to_thread(self.inputs_of, value, field)
        if token_ids:
            texts = await model_work(self.model.decode(token_ids))
        for index, text in enumerate(texts):
            if not text.strip():
                raise invalid(f"Input {index} is empty; every input must contain text.", field)
        return texts

    # ---- work --------------------------------------------------------------------------------------------

    async def embed(self, texts: list[str], truncate: bool | None = None, normalize: bool | None = None,
                    field: str = "input") -> Embedded:
        """`normalize`: TEI's request field; None keeps what the model was exported with (embedding_config.json).
        `field`: the request's name for the texts, which errors name."""
        if normalize is False and self.info.normalize:
            raise invalid(f"Model '{self.name}' returns normalized vectors; 'normalize': false is not available.",
                          "normalize")
        started = time.perf_counter()
        truncate = self.settings.truncation == "truncate" if truncate is None else truncate
        try:
            if self.batcher.takes_at_once(texts):  # counted and embedded in one call (batcher.py)
                tokens, vectors = await self.batcher.submit_uncounted(texts, None if truncate else self.max_tokens)
                counted = self.checked(tokens, truncate, field)
            else:
                tokens = await self.model.count_tokens(texts)
                counted = self.checked(tokens, truncate, field)
                vectors = await self.batcher.submit(texts, counted)
        except QueueFull as error:
            raise APIError(ErrorKind.OVERLOADED, "Too many texts are waiting to be embedded; retry later.") from error
        except (APIError, asyncio.CancelledError):
            raise
        except (ModelProcessStopped, ModelError) as error:
            raise model_error(error) from error
        except Exception as error:
            raise APIError(ErrorKind.INTERNAL, f"Embedding failed: {type(error).__name__}.") from error
        if normalize and not self.info.normalize:
            vectors = [unit(vector) for vector in vectors]
        self.metrics.observe_request(time.perf_counter() - started, sum(counted))
        return Embedded(vectors, sum(counted), sum(n > self.max_tokens for n in tokens))

    def checked(self, tokens: list[int], truncate: bool, field: str) -> list[int]:
        """Each text's tokens as embedded (at most the model's limit), or the 400 of the first text over it when
        inputs are not truncated."""
        too_long = [i for i, n in enumerate(tokens) if n > self.max_tokens]
        if too_long and not truncate:
            index = too_long[0]
            raise invalid(
                f"Input {index} has {tokens[index]} tokens; this model accepts at most {self.max_tokens}.", field
            )
        return [min(n, self.max_tokens) for n in tokens]

    # ---- answers, in each API's shape -------------------------------------------------------------------

    async def openai_embeddings(self, body: EmbeddingRequest) -> tuple[dict[str, Any], int]:
        """OpenAI's /v1/embeddings answer, and how many inputs were truncated."""
        self.check_options(body)
        result = await self.embed(await self.texts_of(body.input))
        data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, body.encoding_format)}
                for i, v in enumerate(result.vectors)]
        usage = {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens}
        return {"object": "list", "data": data, "model": body.model or self.name, "usage": usage}, result.truncated

    async def tei_embeddings(self, body: TEIEmbedRequest) -> tuple[list[Any], int]:
        """TEI's /embed answer (one vector per input), and how many inputs were truncated."""
        texts = await self.texts_of(body.inputs, "inputs")
        result = await self.embed(texts, truncate=body.truncate, normalize=body.normalize, field="inputs")
        return [encode_vector(v, "float") for v in result.vectors], result.truncated

    async def rerank_results(self, body: RerankRequest) -> dict[str, Any]:
        """The Cohere-style /v1/rerank answer."""
        with_text = body.return_documents
        return {"model": body.model or "reranker", "results": [
            {"index": index, "relevance_score": score, **({"document": {"text": text}} if with_text else {})}
            for index, score, text in await self.ranked(body)
        ]}

    async def tei_rerank_results(self, body: RerankRequest) -> list[dict[str, Any]]:
        """TEI's /rerank answer."""
        with_text = body.return_text or body.return_documents
        return [{"index": index, "score": score, **({"text": text} if with_text else {})}
                for index, score, text in await self.ranked(body)]

    # ---- checks and ranking ------------------------------------------------------------------------------

    def check_options(self, body: EmbeddingRequest) -> None:
        """OpenAI's options this service cannot honour: fields it does not know, other dimensions."""
        unknown = sorted(set(body.model_extra or {}))
        if unknown:
            raise invalid(f"Unsupported parameter(s): {', '.join(unknown)}.", unknown[0])
        if body.dimensions is not None and body.dimensions != self.dimensions:
            raise invalid(f"Model '{self.name}' does not support 'dimensions' other than its native "
                          f"{self.dimensions}.", "dimensions")

    async def ranked(self, body: RerankRequest) -> list[tuple[int, float, str]]:
        """(index, score, document), best first, `top_n` of them."""
        documents = body.documents if body.documents is not None else body.texts
        if documents is None:
            raise invalid("'documents' is required.", "documents")
        ranked = await self.rerank(body.query, documents)
        ranked = sorted(ranked, key=lambda pair: pair[1], reverse=True)[: body.top_n or len(ranked)]
        return [(index, float(score), documents[index]) for index, score in ranked]

    async def rerank(self, query: str, documents: list[str]) -> list[tuple[int, float]]:
        if not self.has_reranker:
            raise APIError(ErrorKind.NOT_FOUND, "No reranker model is configured (set RERANK_MODEL_PATH).")
        if not documents:
            raise invalid("'documents' must not be empty.", "documents")
        if len(documents) > self.settings.max_inputs_per_request:
            raise invalid(f"Too many documents: {len(documents)} (at most {self.settings.max_inputs_per_request} per "
                          "request).", "documents")
        return await model_work(self.model.run("rerank", query, documents))


SMALL_INPUT_ITEMS = 64  # strings, or token ids, in an input whose check is done on the loop


def small_input(value: object) -> bool:
    """A string, or a list of at most SMALL_INPUT_ITEMS items, none of them a list longer than that."""
    if isinstance(value, str):
        return True
    return isinstance(value, list) and len(value) <= SMALL_INPUT_ITEMS and not any(
        isinstance(item, list) and len(item) > SMALL_INPUT_ITEMS for item in value)


async def model_work(work: Awaitable[T]) -> T:
    """The model process's answer, or its failure as the error a client gets."""
    try:
        return await work
    except (ModelProcessStopped, ModelError) as error:
        raise model_error(error) from error


def model_error(error: ModelProcessStopped | ModelError) -> APIError:
    if isinstance(error, ModelProcessStopped):  # it is starting again: retry
        return APIError(ErrorKind.UNAVAILABLE, str(error))
    return APIError(ErrorKind.INTERNAL, f"Embedding failed: {error.kind}.")


def unit(vector) -> list[float]:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return (array / norm).tolist() if norm else array.tolist()


def encode_vector(vector, encoding_format: str):
    array = np.asarray(vector, dtype=np.float32)
    if encoding_format == "base64":
        return base64.b64encode(array.astype("<f4").tobytes()).decode()
    return array.tolist()
