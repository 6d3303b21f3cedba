"""The LLM microservice's settings, with the environment names OPEA deployments already set."""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator

from ovgenai_common.settings import ServiceSettings

from .replicas import RoutingPolicy


class LLMSettings(ServiceSettings):
    port: int = Field(9000, ge=0, le=65535)
    llm_endpoint: str = Field(
        "http://localhost:8008",
        validation_alias=AliasChoices("llm_endpoint", "vLLM_ENDPOINT", "LLM_ENDPOINT"),
        description="Base URL of the OpenAI-compatible backend (with or without /v1); several, comma-separated, "
        "for replicas of one model, among which each request is routed (routing).",
    )
    routing: RoutingPolicy = Field(
        "prefix",
        validation_alias=AliasChoices("routing", "LLM_ROUTING"),
        description="With several backends: 'prefix' sends requests whose prompts begin alike to the same replica, "
        "where that prefix is cached (load-bounded, failing replicas tried last); 'round_robin' spreads them evenly.",
    )
    route_prefix_chars: int = Field(
        256, ge=1, validation_alias=AliasChoices("route_prefix_chars", "LLM_ROUTE_PREFIX_CHARS"),
        description="How many characters of the prompt's beginning choose its replica (prefix routing).",
    )
    route_load_factor: float = Field(
        0.25, ge=0, validation_alias=AliasChoices("route_load_factor", "LLM_ROUTE_LOAD_FACTOR"),
        description="A replica serving more than (1 + this) times the mean number of requests in flight is passed "
        "over for the next one in the prompt's order (prefix routing).",
    )
    llm_model: str | None = Field(
        None,
        validation_alias=AliasChoices("llm_model", "LLM_MODEL", "LLM_MODEL_ID"),
        description="Model used when a request names none.",
    )
    backend_api_key: str | None = Field(
        None,
        validation_alias=AliasChoices("backend_api_key", "OPENAI_API_KEY"),
        description="Bearer token sent to the backend (for a protected backend or a hosted API).",
    )
    service_name: str = Field("llm_vllm", description="Appears in the OPEA health-check title.")
    connect_timeout: float = Field(5.0, gt=0, description="Seconds to connect to the backend.")
    read_timeout: float = Field(600.0, gt=0, description="Seconds to wait for the backend's next bytes.")
    health_timeout: float = Field(3.0, gt=0, description="Seconds the backend's health check may take.")
    health_cache_seconds: float = Field(
        1.0, ge=0,
        description="A healthy answer of the backend is reused for at most this long (refreshed in the background "
        "after half of it), so probes never wait behind streams for a round trip; 0 checks on every probe.",
    )
    max_connections: int = Field(1024, ge=1, description="Pooled connections to the backend.")


    @field_validator("llm_endpoint")
    @classmethod
    def _some_endpoint(cls, value: str) -> str:
        if not [url for url in value.split(",") if url.strip()]:
            raise ValueError("name at least one backend URL")
        return value

    @property
    def endpoints(self) -> list[str]:
        """The backend replicas' base URLs."""
        return [url.strip() for url in self.llm_endpoint.split(",") if url.strip()]
