"""The embedding microservice's settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, model_validator
from pydantic_settings import NoDecode

from ovgenai_common.cpu import InferencePrecision
from ovgenai_common.names import DEFAULT_EMBEDDING
from ovgenai_common.settings import PRECISION_HELP, JsonObject, JsonTexts, ServiceSettings


def _sizes(value: Any) -> Any:
    """Sizes as a JSON array (`[256, 512]`, as vLLM's matryoshka_dimensions) or comma-separated (`256,512`)."""
    if isinstance(value, str):
        return json.loads(value) if value.strip().startswith("[") else [p for p in value.split(",") if p.strip()]
    return value


SizeList = Annotated[list[Annotated[int, Field(ge=1)]], NoDecode, BeforeValidator(_sizes)]


class EmbeddingSettings(ServiceSettings):
    port: int = Field(6000, ge=0, le=65535)
    model: str = Field(
        f"models/{DEFAULT_EMBEDDING}",
        validation_alias=AliasChoices("model", "EMBEDDING_MODEL_PATH", "EMBEDDING_MODEL"),
        description="OpenVINO IR folder of the embedding model (as the export tool writes it).",
    )
    served_model_name: str | None = Field(
        None,
        validation_alias=AliasChoices("served_model_name", "EMBEDDING_MODEL_ID"),
        description="Name reported in responses; default: the name the export tool recorded, or the folder name.",
    )
    reranker_model: str | None = Field(
        None,
        validation_alias=AliasChoices("reranker_model", "RERANK_MODEL_PATH", "RERANKER_MODEL"),
        description="OpenVINO IR folder of a cross-encoder; enables /v1/rerank and /rerank.",
    )
    rerank_model_id: str | None = Field(
        None,
        validation_alias=AliasChoices("rerank_model_id", "RERANK_MODEL_ID"),
        description="The reranker as the stack names it (a Hugging Face id or folder, prepared by "
        "'python -m ovgenai_models prepare'): served from model_repository_path unless RERANK_MODEL_PATH is given.",
    )
    model_repository_path: Path = Field(
        Path("models"),
        validation_alias=AliasChoices("model_repository_path", "MODEL_REPOSITORY_PATH"),
        description="The model repository that RERANK_MODEL_ID is looked up in.",
    )
    device: str = Field("CPU", validation_alias=AliasChoices("device", "EMBEDDING_DEVICE"),
                        description="OpenVINO device for the pipelines: CPU, GPU, ...")
    plugin_config: JsonObject = Field(
        default_factory=dict,
        validation_alias=AliasChoices("plugin_config", "EMBEDDING_PLUGIN_CONFIG"),
        description="OpenVINO properties for the pipelines, as a JSON object, e.g. "
        "'{\"DYNAMIC_QUANTIZATION_GROUP_SIZE\": 128}' (faster int8 matmuls, coarser activations).",
    )
    inference_precision: InferencePrecision = Field(
        "auto", description=PRECISION_HELP + " For the embedding model, auto on a CPU with bf16 arithmetic but no "
        "AMX times both at start and keeps the faster (precision.py).")
    max_batch_size: int = Field(32, ge=1, description="Texts embedded together in one pipeline call at most.")

    # Long passages embed faster per passage in batches small enough for their activations to stay in cache
    # (bench/results.md); short queries still batch max_batch_size at a time.
    max_batch_tokens: int = Field(2048, ge=1, description="Tokens in one pipeline call at most.")
    # 0: a batch starts as soon as the pipeline is free, and whatever arrives while it runs forms the next one
    # (as TEI does); a fixed wait only added its length to every lone query.
    batch_wait_ms: float = Field(0.0, ge=0, description="How long a batch waits for company before it runs.")
    max_input_tokens: int = Field(256, ge=1, description="Longest input, in tokens.")
    query_tokens: int | None = Field(None, ge=0, description="One text of at most this many tokens runs on a second "
                                     "compilation of the model for exactly that shape: faster, for one more copy of "
                                     "the weights in memory (~85 MB for the default model). Unset: 32 where padding "
                                     "is free (bf16 on a CPU with AMX, GPUs), 24 on other CPUs computing in bf16, "
                                     "none in f32. 0: none.")
    max_inputs_per_request: int = Field(2048, ge=1, description="Texts (or rerank documents) one request may carry; "
                                        "more get 400.")
    truncation: Literal["truncate", "reject"] = Field(
        "truncate", description="Inputs longer than max_input_tokens: truncate (and say so) or 400."
    )
    max_queued_texts: int = Field(100_000, ge=1, description="Texts waiting at most before the service answers 429.")
    prompts: JsonTexts = Field(
        default_factory=dict, validation_alias=AliasChoices("prompts", "EMBEDDING_PROMPTS"),
        description="Prompts by name, as a JSON object (e.g. '{\"query\": \"query: \", \"document\": \"passage: "
        "\"}'), added over the model's own (its config_sentence_transformers.json); a request chooses one by "
        "prompt_name or input_type, and it is put before each text.")
    default_prompt_name: str | None = Field(
        None, description="The prompt a request that names none gets (one of the prompts); unset: the model's "
        "default_prompt_name, if any, else none.")
    matryoshka: bool | None = Field(
        None, description="Whether the model's vectors may be cut to fewer dimensions (a request's 'dimensions'), "
        "as a Matryoshka model's are. Unset: as its config.json says (is_matryoshka or matryoshka_dimensions, as "
        "vLLM reads them).")
    matryoshka_dimensions: SizeList = Field(
        default_factory=list, description="The sizes 'dimensions' may take, comma-separated or a JSON array (those "
        "the model was trained at; any other is refused): implies MATRYOSHKA. Empty: any up to the model's own, "
        "or the sizes its config.json lists.")

    @model_validator(mode="after")
    def _reranker_from_its_id(self) -> EmbeddingSettings:
        """RERANK_MODEL_ID alone turns reranking on (compose and Kubernetes set it, or leave it empty), from where
        `prepare` put the model: <model_repository_path>/<its served name>."""
        if not self.reranker_model and self.rerank_model_id and self.rerank_model_id.strip():
            from ovgenai_models.sources import ModelReferenceError, served_name

            try:
                self.reranker_model = str(self.model_repository_path / served_name(self.rerank_model_id))
            except ModelReferenceError as error:
                raise ValueError(f"RERANK_MODEL_ID: {error}") from error
        return self
