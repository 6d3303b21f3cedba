"""The gateway's settings, with OPEA ChatQnA's environment names where they exist."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM
from ovgenai_common.settings import ServiceSettings

DEFAULT_PROMPT = (
    "You are a helpful assistant. Answer the question using the context below. "
    "If the context does not contain the answer, say that you don't know.\n\n"
    "Context:\n{context}"
)


class GatewaySettings(ServiceSettings):
    port: int = Field(8888, ge=0, le=65535)
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Largest request (uploads included).")
    embedding_endpoint: str = Field(
        "http://localhost:6000",
        validation_alias=AliasChoices("embedding_endpoint", "EMBEDDING_SERVER_ENDPOINT", "TEI_EMBEDDING_ENDPOINT"),
    )
    embedding_model: str = Field(
        DEFAULT_EMBEDDING, validation_alias=AliasChoices("embedding_model", "EMBEDDING_MODEL_ID")
    )
    embedding_api_key: str = Field("unused", validation_alias=AliasChoices("embedding_api_key", "EMBEDDING_API_KEY"))
    llm_endpoint: str = Field(
        "http://localhost:9000",
        validation_alias=AliasChoices("llm_endpoint", "LLM_SERVER_ENDPOINT", "LLM_SERVICE_ENDPOINT"),
    )
    llm_model: str = Field(
        DEFAULT_LLM, validation_alias=AliasChoices("llm_model", "LLM_MODEL_ID", "LLM_MODEL")
    )
    llm_api_key: str = Field("unused", validation_alias=AliasChoices("llm_api_key", "LLM_API_KEY"))
    pipeline_name: str = Field("chatqna", description="Model name under which /v1/models lists the RAG pipeline.")
    data_dir: str = Field("data/gateway", validation_alias=AliasChoices("data_dir", "DATA_DIR"))
    vector_store: Literal["embedded", "server"] = Field(
        "embedded", description="embedded: Chroma persisted under data_dir; server: a Chroma server (scale-out)."
    )
    chroma_host: str = Field("localhost", validation_alias=AliasChoices("chroma_host", "CHROMA_HOST"))
    chroma_port: int = Field(8000, validation_alias=AliasChoices("chroma_port", "CHROMA_PORT"))
    collection: str = Field("chatqna", validation_alias=AliasChoices("collection", "COLLECTION_NAME"))
    chunk_size: int = Field(1000, ge=50, description="Characters per chunk.")
    chunk_overlap: int = Field(100, ge=0, description="Characters shared by neighbouring chunks.")
    embed_batch_size: int = Field(64, ge=1, description="Chunks embedded per call during ingestion.")
    max_upload_bytes: int = Field(50 * 1024 * 1024, ge=1, description="Largest uploaded file.")
    top_k: int = Field(4, ge=1, le=50, description="Chunks retrieved per question.")
    prompt_template: str = Field(DEFAULT_PROMPT, description="System prompt; {context} receives the chunks.")
    history: Literal["pass", "condense"] = Field(
        "pass", description="pass: earlier turns go to the LLM; condense: they rewrite the question first."
    )
    max_tokens: int = Field(512, ge=1, description="Default answer length.")
    temperature: float = Field(0.0, ge=0, le=2)
    request_timeout: float = Field(300.0, gt=0, description="Seconds to wait for the LLM or embedding service.")
