"""What the stack runs: each service's command, environment, port and health endpoint, in start order.

The same `python -m <package>` commands and environment variable names as the compose file and the launch
scripts, so every way of starting the stack starts the same thing. The models are chosen as everywhere else:
LLM_MODEL_ID, EMBEDDING_MODEL_ID and RERANK_MODEL_ID (a Hugging Face id or a local path), each served under its
served name (ovgenai_models.sources), which the LLM microservice and the gateway are given to ask for.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM
from ovgenai_models.sources import served_name


class StackSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", cli_kebab_case=False)

    models: Path = Field(Path("models"), description="Model repository (prepared by the defaults step if missing).")
    data: Path = Field(Path("data"), description="Where the gateway keeps its vector store.")
    host: str = Field("127.0.0.1", description="Address every service listens on (0.0.0.0: every interface; "
                      "set api_key then).")
    api_key: str | None = Field(
        None, description="The API key every service requires (all but the probes) and sends to the next one; "
        "also read from API_KEY.")
    backend_port: int = Field(8008, description="Port of the LLM backend.")
    embedding_port: int = Field(6000, description="Port of the embedding microservice (and its reranker).")
    llm_port: int = Field(9000, description="Port of the LLM microservice.")
    gateway_port: int = Field(8888, description="Port of the RAG gateway: the chat page and ChatQnA's API.")
    # LLM_MODEL and EMBEDDING_MODEL: the names earlier versions of the stack read.
    llm_model_id: str = Field(DEFAULT_LLM, validation_alias=AliasChoices(
        "llm_model_id", "LLM_MODEL_ID", "llm_model", "LLM_MODEL"),
        description="The LLM: a Hugging Face id (owner/name, or owner/name:QUANT for one file of a GGUF repository), "
        "a local folder or a .gguf file.")
    llm_model_revision: str | None = Field(None, description="Hub branch, tag or commit of the LLM "
                                           "(LLM_MODEL_REVISION).")
    gguf_filename: str | None = Field(None, description="The file of a GGUF repository to serve (GGUF_FILENAME).")
    embedding_model_id: str = Field(DEFAULT_EMBEDDING, validation_alias=AliasChoices(
        "embedding_model_id", "EMBEDDING_MODEL_ID", "embedding_model", "EMBEDDING_MODEL"),
        description="The embedding model: a Hugging Face id or a local folder.")
    embedding_model_revision: str | None = Field(None, description="EMBEDDING_MODEL_REVISION.")
    rerank_model_id: str | None = Field(None, description="A cross-encoder (Hugging Face id or local folder): turns "
                                        "the gateway's rerank stage on, served by the embedding service.")
    rerank_model_revision: str | None = Field(None, description="RERANK_MODEL_REVISION.")
    llm_draft_model_id: str | None = Field(None, description="A draft model for the LLM (speculative decoding: a "
                                           "smaller model of the same tokenizer; Hugging Face id, folder or .gguf).")
    startup_timeout: float = Field(300, description="Seconds each service may take to become healthy.")
    prepare_models: bool = Field(True, description="Prepare the default models first when they are missing.")
    # The stack's LLM mostly answers the gateway, whose answers quote their context, which prompt lookup decoding
    # speeds up (bench/results.md): the stack switches it on; the backend alone does not.
    prompt_lookup: bool = Field(True, description="Serve the LLM with prompt lookup decoding (PROMPT_LOOKUP).")

    @field_validator("llm_model_revision", "gguf_filename", "embedding_model_revision", "rerank_model_id",
                     "rerank_model_revision", "llm_draft_model_id", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def llm_name(self) -> str:
        return served_name(self.llm_model_id)

    @property
    def embedding_name(self) -> str:
        return served_name(self.embedding_model_id)

    @property
    def rerank_name(self) -> str | None:
        return served_name(self.rerank_model_id) if self.rerank_model_id else None


@dataclass
class Service:
    name: str
    module: str
    port: int
    health_path: str
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    after: tuple[str, ...] = ()
    # The stack's setting that moves it (the environment variable; `--<lower case>` on the command line).
    port_variable: str = ""

    def command(self) -> list[str]:
        return [sys.executable, "-m", self.module, *self.args]


def local(port: int) -> str:
    return f"http://127.0.0.1:{port}"


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def no_proxy_for_loopback(environ: dict[str, str]) -> dict[str, str]:
    """no_proxy and NO_PROXY with the loopback names added: the services call each other on 127.0.0.1, and with
    http_proxy set (a corporate network) and no such entry, HTTP clients (httpx) send those calls, and the
    launcher's health checks, to the proxy. The user's own entries are kept."""
    given = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    names = [name.strip() for name in given.split(",") if name.strip()]
    value = ",".join([*names, *(name for name in LOOPBACK_NAMES if name not in names)])
    return {"no_proxy": value, "NO_PROXY": value}


def keys(settings: StackSettings, *outgoing: str) -> dict[str, str]:
    """The service's own key and the ones it sends downstream: all the stack's one key (none without one)."""
    if not settings.api_key:
        return {}
    return {name: settings.api_key for name in ("SERVICE_API_KEY", *outgoing)}


def draft_args(settings: StackSettings) -> list[str]:
    """The backend's draft model, prepared beside the LLM (it replaces prompt lookup decoding)."""
    if not settings.llm_draft_model_id:
        return []
    return ["--draft_model", str(settings.models / served_name(settings.llm_draft_model_id))]


def plan(settings: StackSettings, environ: dict[str, str] | None = None) -> list[Service]:
    common = {"HOST": settings.host, **no_proxy_for_loopback(dict(os.environ) if environ is None else environ)}
    llm, embedding, rerank = settings.llm_name, settings.embedding_name, settings.rerank_name
    reranker = {"RERANK_MODEL_PATH": str(settings.models / rerank)} if rerank else {}
    rerank_stage = {"RERANK_SERVER_ENDPOINT": local(settings.embedding_port)} if rerank else {}
    return [
        # Only the chosen LLM, although the repository may hold others prepared earlier: each model served costs
        # its weights and its share of the memory the KV cache is sized from.
        Service("backend", "ovgenai_server", settings.backend_port, "/health",
                {**common, **keys(settings), "PROMPT_LOOKUP": str(settings.prompt_lookup).lower(),
                 "PORT": str(settings.backend_port)},
                ["--model", str(settings.models / llm), "--served_model_name", llm, *draft_args(settings)],
                port_variable="BACKEND_PORT"),
        Service("embedding", "ovgenai_services.embedding", settings.embedding_port, "/v1/health_check",
                {**common, **keys(settings), "PORT": str(settings.embedding_port),
                 "EMBEDDING_MODEL_PATH": str(settings.models / embedding), "EMBEDDING_MODEL_ID": embedding,
                 **reranker}, port_variable="EMBEDDING_PORT"),
        Service("llm", "ovgenai_services.llm", settings.llm_port, "/v1/health_check",
                {**common, **keys(settings, "OPENAI_API_KEY"), "PORT": str(settings.llm_port),
                 "LLM_ENDPOINT": local(settings.backend_port), "LLM_MODEL": llm}, after=("backend",),
                port_variable="LLM_PORT"),
        Service("gateway", "ovgenai_services.gateway", settings.gateway_port, "/v1/health_check",
                {**common, **keys(settings, "LLM_API_KEY", "EMBEDDING_API_KEY", "RERANK_API_KEY"),
                 "PORT": str(settings.gateway_port), "EMBEDDING_SERVER_ENDPOINT": local(settings.embedding_port),
                 "LLM_SERVER_ENDPOINT": local(settings.llm_port), "LLM_MODEL_ID": llm,
                 "EMBEDDING_MODEL_ID": embedding, "DATA_DIR": str(settings.data / "gateway"), **rerank_stage},
                after=("embedding", "llm"), port_variable="GATEWAY_PORT"),
    ]
