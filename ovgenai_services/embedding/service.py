"""Embedding logic: a request's checks (inputs.py), its prompt chosen and put before its texts (prompts.py), its texts
counted and embedded in one call of the model process through the batcher, the answer in its API's shape, its vectors
cut to the dimensions asked for (answers.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ovgenai_common.errors import APIError, ErrorKind

from . import answers
from .batcher import Batcher, QueueFull
from .inputs import InputRules, non_empty, small_input
from .model import EmbeddingModelInfo, ModelConfig, read_model_info
from .model_process import ModelError, ModelProcess, ModelProcessStopped
from .prompts import prompted
from .protocol import EmbeddingRequest, RerankRequest, TEIEmbedRequest
from .settings import EmbeddingSettings

T = TypeVar("T")


def model_config(settings: EmbeddingSettings) -> ModelConfig:
    """What the model process loads; a folder without a model is refused here, before any process starts."""
    folder = Path(settings.model)
    if not (folder / "openvino_model.xml").is_file():
        raise FileNotFoundError(
            f"No OpenVINO embedding model in '{folder}'; prepare it with "
            "'python -m ovgenai_models defaults' or "
            "'python -m ovgenai_models embeddings --source_model ...'."
        )
    info = operated(read_model_info(folder, settings.served_model_name), settings)
    return ModelConfig(folder, settings.device, info, min(settings.max_input_tokens, info.max_length),
                       dict(settings.plugin_config), settings.inference_precision,
                       Path(settings.reranker_model) if settings.reranker_model else None, settings.query_tokens,
                       settings.max_batch_tokens)


def operated(info: EmbeddingModelInfo, settings: EmbeddingSettings) -> EmbeddingModelInfo:
    """The model's facts with the operator's over them: prompts added (and the default one named), Matryoshka sizes
    (MATRYOSHKA_DIMENSIONS implies MATRYOSHKA; either, unset, leaves the folder's word)."""
    try:
        prompts = info.prompts.over(settings.prompts, settings.default_prompt_name)
    except ValueError as error:
        raise ValueError(f"DEFAULT_PROMPT_NAME: {error}") from error
    sizes = tuple(settings.matryoshka_dimensions) or info.matryoshka_dimensions
    matryoshka = bool(settings.matryoshka_dimensions) or (
        info.matryoshka if settings.matryoshka is None else settings.matryoshka)
    return replace(info, prompts=prompts, matryoshka=matryoshka, matryoshka_dimensions=sizes if matryoshka else ())


@dataclass
class Embedded:
    vectors: list
    prompt_tokens: int
    truncated: int


class EmbeddingService:
    """The requests' logic, in sequence: checks, the model's work (in the model process: model_process.py, never on
    this one), the answer's shape."""

    def __init__(self, settings: EmbeddingSettings, metrics, model: ModelProcess):
        assert model.facts is not None  # the model process has loaded
        self.truncate = settings.truncation == "truncate"
        self.metrics = metrics
        self.model = model
        info = model.config.info
        self.rules = InputRules(info.name, settings.max_inputs_per_request, model.config.max_tokens,
                                model.facts.dimensions, model.facts.vocabulary, info.normalize, info.prompts,
                                info.matryoshka, info.matryoshka_dimensions)
        self.has_reranker = model.config.reranker is not None
        self.batcher = Batcher(model.embed, settings.max_batch_size, settings.max_batch_tokens, self.rules.max_tokens,
                               settings.batch_wait_ms / 1000, settings.max_queued_texts, on_batch=metrics.observe_batch)
        metrics.watch_queue(lambda: self.batcher.queued)

    @classmethod
    async def load(cls, settings: EmbeddingSettings, metrics) -> EmbeddingService:
        """The service once its model process has loaded the model."""
        model = await ModelProcess.start(model_config(settings), settings.log_level, settings.log_format)
        return cls(settings, metrics, model)

    @property
    def name(self) -> str:
        return self.rules.name

    @property
    def dimensions(self) -> int:
        return self.rules.dimensions

    def start(self) -> None:
        self.batcher.start()

    async def close(self) -> None:
        await self.batcher.close()
        await self.model.close()

    # ---- each API's request, in sequence --------------------------------------------------------------------

    async def openai_embeddings(self, body: EmbeddingRequest) -> tuple[dict[str, Any], int]:
        """OpenAI's /v1/embeddings answer, and how many inputs were truncated."""
        self.rules.check_options(body)
        dimensions = self.rules.shortened_to(body.dimensions)
        prompt = self.rules.prompts.choose(body.prompt_name, body.input_type)
        cut = self.rules.cut_of(body.truncate_prompt_tokens)
        texts = prompted(prompt, await self.texts_of(body.input))
        result = await self.embed(texts, truncate=True if cut is not None else None, cut=cut)
        vectors = answers.shortened(result.vectors, dimensions, self.rules.normalized)
        answer = answers.openai_embeddings(vectors, result.prompt_tokens, body.model or self.name, body.encoding_format)
        return answer, result.truncated

    async def tei_embeddings(self, body: TEIEmbedRequest) -> tuple[list[Any], int]:
        """TEI's /embed answer (one vector per input), and how many inputs were truncated."""
        dimensions = self.rules.shortened_to(body.dimensions)
        prompt = self.rules.prompts.choose(body.prompt_name, None)
        normalize = self.rules.normalizes(body.normalize)
        texts = prompted(prompt, await self.texts_of(body.inputs, "inputs"))
        result = await self.embed(texts, truncate=body.truncate, field="inputs")
        vectors = answers.shortened(result.vectors, dimensions, self.rules.normalized)
        return answers.tei_embeddings(vectors, normalize), result.truncated

    async def rerank_results(self, body: RerankRequest) -> dict[str, Any]:
        """The Cohere-style /v1/rerank answer."""
        return answers.rerank(await self.ranked(body), body.model or "reranker", body.return_documents)

    async def tei_rerank_results(self, body: RerankRequest) -> list[dict[str, Any]]:
        """TEI's /rerank answer."""
        return answers.tei_rerank(await self.ranked(body), body.return_text or body.return_documents)

    # ---- the steps ------------------------------------------------------------------------------------------

    async def texts_of(self, value: object, field: str = "input") -> list[str]:
        """The request's texts, token ids decoded by the model process. Checking a large request's ids is
        Python's work: on a worker thread, so that the loop keeps its turns; a small one's takes microseconds,
        less than the thread's round trip."""
        if small_input(value):
            texts, token_ids = self.rules.inputs_of(value, field)
        else:
            texts, token_ids = await asyncio.to_thread(self.rules.inputs_of, value, field)
        if token_ids:
            texts = await model_work(self.model.decode(token_ids))
        return non_empty(texts, field)

    async def embed(self, texts: list[str], truncate: bool | None = None, field: str = "input",
                    cut: int | None = None) -> Embedded:
        """The texts' vectors and tokens, counted and embedded in one call of the model (with other requests' texts
        where they arrive together: batcher.py). `truncate`: None keeps the service's policy. `field`: the request's
        name for the texts, which errors name. `cut`: the tokens each text is cut to (None: the model's limit)."""
        started = time.perf_counter()
        truncate = self.truncate if truncate is None else truncate
        max_tokens = self.rules.max_tokens
        cut = cut if cut is not None and cut < max_tokens else None
        try:
            counts, vectors = await self.batcher.submit(texts, None if truncate else max_tokens, cut)
        except QueueFull as error:
            raise APIError(ErrorKind.OVERLOADED, "Too many texts are waiting to be embedded; retry later.") from error
        except (APIError, asyncio.CancelledError):
            raise
        except (ModelProcessStopped, ModelError) as error:
            raise model_error(error) from error
        except Exception as error:
            raise APIError(ErrorKind.INTERNAL, f"Embedding failed: {type(error).__name__}.") from error
        embedded = self.rules.embedded_tokens(counts, truncate, field, cut)  # the 400 of a text over the limit
        assert vectors is not None  # none only when a text was over a limit, refused just above
        self.metrics.observe_request(time.perf_counter() - started, sum(embedded))
        return Embedded(list(vectors), sum(embedded), sum(n > (cut or max_tokens) for n in counts))

    async def ranked(self, body: RerankRequest) -> answers.Ranked:
        """(index, score, document), best first, `top_n` of them."""
        documents = self.rules.documents(body)
        return answers.ranked(await self.rerank(body.query, documents), documents, body.top_n)

    async def rerank(self, query: str, documents: list[str]) -> list[tuple[int, float]]:
        if not self.has_reranker:
            raise APIError(ErrorKind.NOT_FOUND, "No reranker model is configured (set RERANK_MODEL_PATH).")
        self.rules.check_documents(documents)
        return await model_work(self.model.run("rerank", query, documents))


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
