"""Request models of the embedding service: OpenAI's /v1/embeddings, TEI's /embed and /rerank, Cohere-style
/v1/rerank."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


def _closed_schema(schema: dict) -> None:
    schema["additionalProperties"] = False  # unknown fields are kept only to be named in a 400


# Strict values (no `0.0` for a boolean, no `"5"` for an integer): the OpenAPI document is exactly what is accepted.
_STRICT = ConfigDict(strict=True)
# What a request's texts are, by Cohere's, Voyage's and NVIDIA NIM's names: each chooses the model's prompt for it.
InputType = Literal["query", "document", "passage", "search_query", "search_document"]


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, json_schema_extra=_closed_schema)

    input: str | list[str] | list[int] | list[list[int]]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, Field(ge=1)] | None = None
    user: str | None = None
    # TEI's and sentence-transformers' name of one of the model's prompts, put before each text; or input_type.
    prompt_name: str | None = None
    input_type: InputType | None = None
    # vLLM's: each text cut to this many tokens (-1: the model's limit) rather than refused or cut by the service.
    truncate_prompt_tokens: Annotated[int, Field(ge=-1)] | None = None


class TEIEmbedRequest(BaseModel):
    model_config = _STRICT

    inputs: str | list[str]
    truncate: bool | None = None
    # TEI's field (default true there): a model exported with normalized vectors cannot give raw ones (400), one
    # exported without normalization is normalized on request.
    normalize: bool | None = None
    prompt_name: str | None = None
    dimensions: Annotated[int, Field(ge=1)] | None = None


class RerankRequest(BaseModel):
    model_config = _STRICT

    query: str
    documents: list[str] | None = None
    texts: list[str] | None = None  # TEI's name for the documents
    top_n: Annotated[int, Field(ge=1)] | None = None
    return_documents: bool = False
    return_text: bool = False  # TEI's name
    model: str | None = None
