"""The TorchServe LLM-API's environment names, mapped onto the backend's own settings.

LLM-API: MODEL_NAME, MODEL_PATH, MAX_INPUT_TOKENS, MAX_NEW_TOKENS, DTYPE, QUANTIZATION, END_OF_STREAM_TOKEN.
TorchServe's config.properties keys (also as TS_<KEY>, as TorchServe reads them): inference_address,
management_address, metrics_address, grpc_inference_port, max_request_size, max_response_size,
default_response_timeout; and config.properties itself, read as TorchServe reads it (`--ts-config` or
TS_CONFIG_FILE): flags and the environment win over the file, the file over the defaults. Every other backend
setting (device, KV cache, ...) keeps its own name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsError

from ..settings import BackendSettings

# DTYPE (a torch dtype name) -> the inference precision OpenVINO computes in.
# bfloat16 is the backend's "auto": bf16 where the CPU computes it fast (AMX), f32 elsewhere, where bf16 is slower.
PRECISION_OF_DTYPE = {"bfloat16": "auto", "float16": "f16", "float32": "f32", "auto": "auto"}
# QUANTIZATION -> the weights the engine compresses to at load (NNCF; cached under cache_dir).
WEIGHTS_OF_QUANTIZATION = {"none": None, "8bit": "int8", "4bit": "int4"}


def _names(*names: str) -> AliasChoices:
    return AliasChoices(*names, *(f"TS_{name.upper()}" for name in names if name.islower()))


class ConfigProperties(PydanticBaseSettingsSource):
    """TorchServe's config.properties (Java properties, read with javaproperties), below flags and the environment.

    A key the backend also has a name for (inference_address: HOST and PORT; max_request_size: MAX_REQUEST_BYTES)
    is taken from the file only when that name was not given either, so the environment still wins."""

    KEYS = ("inference_address", "management_address", "metrics_address", "grpc_inference_port", "max_request_size",
            "max_response_size", "default_response_timeout")
    OVERLAPS = {"inference_address": ("host", "port"), "max_request_size": ("max_request_bytes",)}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # noqa: ARG002
        return None, field_name, False  # the whole file is read in __call__

    def _given(self, *fields: str) -> Any:
        """The value flags or the environment gave one of `fields` (under its name or any alias), else None."""
        given = {key.lower(): value for key, value in self.current_state.items()}
        for name in fields:
            info = self.settings_cls.model_fields[name]
            aliases = info.validation_alias.choices if isinstance(info.validation_alias, AliasChoices) else []
            for alias in (name, *(a for a in aliases if isinstance(a, str))):
                if alias.lower() in given:
                    return given[alias.lower()]
        return None

    def __call__(self) -> dict[str, Any]:
        import javaproperties

        path = self._given("ts_config")
        if not path:
            return {}
        try:
            with open(path, encoding="utf-8") as file:
                properties = javaproperties.load(file)
        except (OSError, ValueError) as error:
            raise SettingsError(f"Cannot read TorchServe's config file '{path}' (--ts-config, TS_CONFIG_FILE): "
                                f"{error}") from error
        return {key: properties[key] for key in self.KEYS
                if key in properties and self._given(key, *self.OVERLAPS.get(key, ())) is None}


class TorchServeSettings(BackendSettings):
    ts_config: Path | None = Field(
        None, validation_alias=AliasChoices("ts_config", "ts-config", "TS_CONFIG_FILE"),
        description="TorchServe's config.properties: inference_address, management_address, metrics_address, "
        "grpc_inference_port, max_request_size, max_response_size, default_response_timeout (flags and the "
        "environment win over it).")
    model_name: str | None = Field(None, validation_alias=_names("model_name", "MODEL_NAME"),
                                   description="The name clients use in /predictions/{model_name}.")
    max_input_tokens: int = Field(2048, ge=1, validation_alias=_names("max_input_tokens", "MAX_INPUT_TOKENS"),
                                  description="Longest input, in tokens; a longer one gets 400.")
    max_new_tokens: int = Field(2048, ge=1, validation_alias=_names("max_new_tokens", "MAX_NEW_TOKENS"),
                                description="Most tokens one answer may generate: a request asking for more "
                                "gets 400, one that names no max_new_tokens stops here.")
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = Field(
        "bfloat16", validation_alias=_names("dtype", "DTYPE"),
        description="bfloat16: bf16 on CPUs with AMX, f32 on others (faster there); float16: f16; float32: f32.")
    quantization: Literal["none", "8bit", "4bit"] = Field(
        "none", validation_alias=_names("quantization", "QUANTIZATION"),
        description="8bit / 4bit: int8 / int4 weights, compressed at load (a GGUF model keeps its own).")
    end_of_stream_token: str = Field("<|endoftext|>", validation_alias=_names("end_of_stream_token",
                                                                              "END_OF_STREAM_TOKEN"),
                                     description="Text sent after the answer's last text, so that a client knows "
                                     "it is complete.")
    inference_address: str = Field("http://127.0.0.1:8080", validation_alias=_names("inference_address"),
                                   description="Address of the inference API (/predictions and /ping, beside the "
                                   "backend's own routes); HOST and PORT set it too.")
    management_address: str = Field("http://127.0.0.1:8081", validation_alias=_names("management_address"),
                                    description="Address of TorchServe's management API (/models).")
    metrics_address: str = Field("http://127.0.0.1:8082", validation_alias=_names("metrics_address"),
                                 description="Address of the Prometheus metrics (/metrics).")
    grpc_inference_port: int = Field(7070, ge=0, le=65535, validation_alias=_names("grpc_inference_port"),
                                     description="Port of TorchServe's gRPC inference API, on the inference "
                                     "address's host.")
    max_request_size: int = Field(6553500, ge=1024, validation_alias=_names("max_request_size"),
                                  description="Largest request body, in bytes (TorchServe's default).")
    max_response_size: int = Field(6553500, ge=1024, validation_alias=_names("max_response_size"),
                                   description="Largest response, in bytes: a stream is ended beyond it.")
    default_response_timeout: float = Field(120, gt=0, validation_alias=_names("default_response_timeout"),
                                            description="Seconds a generation may run; then it is ended and its KV "
                                            "cache freed.")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Flags (pydantic-settings puts the CLI first), then the environment, then config.properties.
        return init_settings, env_settings, dotenv_settings, file_secret_settings, ConfigProperties(settings_cls)

    @field_validator("quantization", "dtype", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    def backend(self) -> BackendSettings:
        """The same values as the backend reads them (only the LLM-API's names differ)."""
        given = self.model_fields_set
        values = self.model_dump(include=set(BackendSettings.model_fields))
        # TorchServe's names win when given, then the backend's own, then TorchServe's defaults.
        if "inference_address" in given or not {"host", "port"} & given:
            values["host"], values["port"] = address(self.inference_address)
        if "max_request_size" in given or "max_request_bytes" not in given:
            values["max_request_bytes"] = self.max_request_size
            values["max_json_bytes"] = self.max_request_size  # one limit for every body, as in TorchServe
        if "inference_precision" not in self.model_fields_set:
            values["inference_precision"] = PRECISION_OF_DTYPE[self.dtype]
        weights = WEIGHTS_OF_QUANTIZATION[self.quantization]
        values.update(
            served_model_name=self.model_name or self.served_model_name,
            enable_quantized_weights=self.enable_quantized_weights or weights is not None,
            quantized_weights=weights or self.quantized_weights,
        )
        return BackendSettings.model_validate(values)


def address(url: str) -> tuple[str, int]:
    """(host, port) of a TorchServe address such as http://127.0.0.1:8080."""
    parts = urlsplit(url if "//" in url else f"http://{url}")
    return parts.hostname or "127.0.0.1", parts.port or 80
