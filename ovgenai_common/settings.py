"""Settings shared by every service; each service subclasses `ServiceSettings` once."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .body import MAX_JSON_DEPTH


def _comma_separated(value: Any) -> Any:
    """A list given as one comma-separated string, as an environment variable carries it."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _json_object(value: Any) -> Any:
    """JSON text from the environment or the command line; an empty string (compose's unset variable) is {}."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else {}
    return value


def _origin_list(value: Any) -> Any:
    """Origins as OVMS takes them (comma-separated) or as vLLM does (a JSON array: `--allowed-origins '["*"]'`)."""
    if isinstance(value, str) and value.strip().startswith("["):
        return json.loads(value)
    return _comma_separated(value)


def _origins(values: list[str]) -> list[str]:
    """Each origin as a browser sends it in `Origin` (scheme://host[:port], lower case, no path), or `*`."""
    origins = []
    for value in values:
        parts = urlsplit(value.strip())
        if value.strip() == "*":
            origins.append("*")
        elif parts.scheme and parts.netloc and parts.path in ("", "/") and not parts.query and not parts.fragment:
            origins.append(f"{parts.scheme}://{parts.netloc}".lower())
        else:
            raise ValueError(f"'{value}' is not an origin: write scheme://host[:port], e.g. http://localhost:5173")
    return origins


PRECISION_HELP = (
    "CPU inference precision: auto (f32 on CPUs without AMX, OpenVINO's bf16 on CPUs with it), f32, bf16 or f16."
)

# KV-cache precisions OpenVINO takes; the backend's setting and the export tool's graph.pbtxt option share them.
KVCachePrecision = Literal["u8", "u4", "f16", "bf16", "f32"]
# A model's tool-call format and reasoning parser, by the names OVMS's and vLLM's guides use (the backend's
# tool_calls.py and reasoning.py say what each reads).
ToolParserName = Literal["hermes3", "hermes", "qwen3", "llama3", "llama3_json", "pythonic", "llama4_pythonic", "auto"]
ReasoningParserName = Literal["qwen3", "deepseek_r1", "phi4"]

# A setting given as one JSON object, such as OpenVINO properties.
JsonObject = Annotated[dict[str, Any], NoDecode, BeforeValidator(_json_object)]
# One JSON object of texts by name, such as an embedding model's prompts.
JsonTexts = Annotated[dict[str, str], NoDecode, BeforeValidator(_json_object)]
# A setting given as a comma-separated list.
NameList = Annotated[list[str], NoDecode, BeforeValidator(_comma_separated)]
# Web origins (CORS), comma-separated or a JSON array.
OriginList = Annotated[list[str], NoDecode, BeforeValidator(_origin_list), AfterValidator(_origins)]

MiB = 1024 * 1024
# The largest JSON body by default; also the longest prompt OPEA's chat_template may fill (ovgenai_common/opea.py).
MAX_JSON_BYTES = 4 * MiB


# The `--help` names derived from a settings class's module (ServiceSettings.__pydantic_init_subclass__).
_DERIVED_PROG_NAMES: set[str] = set()


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=None, extra="ignore", populate_by_name=True, case_sensitive=False
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """`--help` names the command as users type it (`python -m ovgenai_services.llm`), not `__main__.py`: each
        service's settings live in its package's settings module."""
        super().__pydantic_init_subclass__(**kwargs)
        inherited = cls.model_config.get("cli_prog_name")
        if inherited is None or inherited in _DERIVED_PROG_NAMES:  # not one a class set itself
            cls.model_config["cli_prog_name"] = f"python -m {cls.__module__.removesuffix('.settings')}"
            _DERIVED_PROG_NAMES.add(cls.model_config["cli_prog_name"])

    # Loopback unless asked: a service on every interface without a key is open to the whole network.
    host: str = Field("127.0.0.1", description="Address to listen on (0.0.0.0: every interface; set an API key).")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on.")
    api_key: str | None = Field(
        None,
        validation_alias=AliasChoices("api_key", "SERVICE_API_KEY"),
        description="When set, every route but the probes (/health, /live, /v1/health_check) requires "
        "'Authorization: Bearer <key>': the APIs, /metrics, /docs and /openapi.json included.",
    )
    forwarded_allow_ips: NameList = Field(
        default_factory=list,
        validation_alias=AliasChoices("forwarded_allow_ips", "FORWARDED_ALLOW_IPS"),
        description="The proxies (addresses or networks, comma-separated; '*' for any) whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed: a client behind them is the address they name. Empty: none, and a client is "
        "the address its connection comes from (uvicorn's own setting, whose default trusted loopback).",
    )
    allowed_hosts: NameList = Field(
        default_factory=list,
        description="Without an API key, the host names (besides loopback names, IP addresses and the bound name) "
        "that requests may be addressed to, comma-separated: 'chat.example.com,*.corp.example', or '*' for any. "
        "Refusing other names stops DNS-rebinding pages.",
    )
    allowed_origins: OriginList = Field(
        default_factory=list,
        description="Web pages on other origins that may call this service from a browser (CORS), comma-separated: "
        "'http://localhost:5173,https://ui.example.com'. Empty: none (browsers keep other origins' pages from "
        "reading its answers). '*' for any page needs an API key: without one, any site the user visits could use "
        "the service through the browser.",
    )
    log_level: str = Field("info", description="Logging level (debug, info, warning, error).")
    logflag: bool = Field(False, validation_alias=AliasChoices("logflag", "LOGFLAG"),
                          description="OPEA's name: true logs at debug level (where log_level is not set).")
    log_format: Literal["text", "json"] = Field(
        "text", description="Log lines as text, or one JSON object per line (time, level, logger, message, "
        "request_id) for log collectors.",
    )
    ssl_keyfile: str | None = Field(
        None, description="Serve HTTPS with this private key (with ssl_certfile), as uvicorn and vLLM take it.")
    ssl_certfile: str | None = Field(
        None, description="Serve HTTPS with this certificate chain (with ssl_keyfile); the health check then asks "
        "https on loopback.")
    otel_exporter_otlp_endpoint: str | None = Field(
        None, description="OpenTelemetry collector's OTLP/HTTP base URL (e.g. http://otel-collector:4318): when set, "
        "request and stage spans are sent to its /v1/traces; unset, nothing is traced or sent.",
    )
    otel_service_name: str | None = Field(
        None, description="The service's name on its spans (default: the service's own, e.g. ovgenai-server)."
    )
    max_request_bytes: int = Field(4 * MiB, ge=1024, description="Largest request body; larger bodies get 413.")
    max_json_bytes: int = Field(
        MAX_JSON_BYTES, ge=1024, description="Largest JSON body (at most max_request_bytes); larger bodies get 413."
    )
    max_json_depth: int = Field(MAX_JSON_DEPTH, ge=1, le=256, description="Deepest nesting of JSON arrays and objects "
                                "accepted; deeper bodies get 400.")
    body_timeout: float = Field(
        60.0, gt=0, description="Seconds a client may take to send a JSON body, or to send the next part of an "
        "upload; a slower one gets 408 and its connection closes (a body trickled in would hold it open for ever).",
    )
    graceful_shutdown_seconds: float = Field(
        30.0, ge=0, description="On SIGTERM, how long running requests may take to finish before exit."
    )

    @model_validator(mode="after")
    def _opea_logflag(self) -> ServiceSettings:
        if self.logflag and "log_level" not in self.model_fields_set:
            self.log_level = "debug"
        return self

    @model_validator(mode="after")
    def _tls_needs_both(self) -> ServiceSettings:
        if bool(self.ssl_keyfile) != bool(self.ssl_certfile):
            raise ValueError("HTTPS needs both ssl_keyfile and ssl_certfile (SSL_KEYFILE, SSL_CERTFILE)")
        return self

    @model_validator(mode="after")
    def _any_origin_needs_a_key(self) -> ServiceSettings:
        if "*" in self.allowed_origins and not self.api_key:
            raise ValueError("ALLOWED_ORIGINS='*' lets every web page the user visits call this service through the "
                             "browser: set an API key (API_KEY), or list the pages' origins instead")
        return self


class ResponseStoreSettings(BaseSettings):
    """The Responses API's store (response_store.py), for the services that answer /v1/responses."""

    responses_store_size: int = Field(
        1000, ge=0, description="Responses kept for previous_response_id and GET /v1/responses/{id} (with their "
        "conversations, within 64 MiB in all); past it the oldest of the client keeping the most goes first. 0: none "
        "are kept, and store: true is answered but not kept.",
    )
    responses_store_ttl: float = Field(3600.0, gt=0, description="Seconds a stored response is kept.")
