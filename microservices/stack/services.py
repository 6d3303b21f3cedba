"""What the stack runs: each service's command, environment, port and health endpoint, in start order.

The same `python -m <package>` commands and environment variable names as the compose file and the launch
scripts, so every way of starting the stack starts the same thing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM


class StackSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", cli_kebab_case=False)

    models: Path = Field(Path("models"), description="Model repository (prepared by the defaults step if missing).")
    data: Path = Field(Path("data"), description="Where the gateway keeps its vector store.")
    host: str = Field("127.0.0.1", description="Address every service listens on (0.0.0.0: every interface; "
                      "set api_key then).")
    api_key: str | None = Field(
        None, description="The API key every service requires (all but the probes) and sends to the next one; "
        "also read from API_KEY.")
    backend_port: int = 8008
    embedding_port: int = 6000
    llm_port: int = 9000
    gateway_port: int = 8888
    llm_model: str = DEFAULT_LLM
    embedding_model: str = DEFAULT_EMBEDDING
    startup_timeout: float = Field(300, description="Seconds each service may take to become healthy.")
    prepare_models: bool = Field(True, description="Prepare the default models first when they are missing.")
    # The stack's LLM mostly answers the gateway, whose answers quote their context: with a few in flight, prompt
    # lookup decoding gives them 1.4-1.8x the answer tokens/s (README, "RAG-aware decoding"), so the stack switches
    # it on; the backend alone does not.
    prompt_lookup: bool = Field(True, description="Serve the LLM with prompt lookup decoding (PROMPT_LOOKUP).")


@dataclass
class Service:
    name: str
    module: str
    port: int
    health_path: str
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    after: tuple[str, ...] = ()

    def command(self) -> list[str]:
        return [sys.executable, "-m", self.module, *self.args]


def local(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def keys(settings: StackSettings, *outgoing: str) -> dict[str, str]:
    """The service's own key and the ones it sends downstream: all the stack's one key (none without one)."""
    if not settings.api_key:
        return {}
    return {name: settings.api_key for name in ("SERVICE_API_KEY", *outgoing)}


def plan(settings: StackSettings) -> list[Service]:
    common = {"HOST": settings.host}
    return [
        Service("backend", "ovgenai_server", settings.backend_port, "/health",
                {**common, **keys(settings), "PROMPT_LOOKUP": str(settings.prompt_lookup).lower(),
                 "PORT": str(settings.backend_port)},
                ["--model", str(settings.models)]),
        Service("embedding", "microservices.embedding", settings.embedding_port, "/v1/health_check",
                {**common, **keys(settings), "PORT": str(settings.embedding_port),
                 "EMBEDDING_MODEL_PATH": str(settings.models / settings.embedding_model)}),
        Service("llm", "microservices.llm", settings.llm_port, "/v1/health_check",
                {**common, **keys(settings, "OPENAI_API_KEY"), "PORT": str(settings.llm_port),
                 "LLM_ENDPOINT": local(settings.backend_port), "LLM_MODEL": settings.llm_model}, after=("backend",)),
        Service("gateway", "microservices.gateway", settings.gateway_port, "/v1/health_check",
                {**common, **keys(settings, "LLM_API_KEY", "EMBEDDING_API_KEY", "RERANK_API_KEY"),
                 "PORT": str(settings.gateway_port), "EMBEDDING_SERVER_ENDPOINT": local(settings.embedding_port),
                 "LLM_SERVER_ENDPOINT": local(settings.llm_port), "LLM_MODEL_ID": settings.llm_model,
                 "EMBEDDING_MODEL_ID": settings.embedding_model, "DATA_DIR": str(settings.data / "gateway")},
                after=("embedding", "llm")),
    ]
