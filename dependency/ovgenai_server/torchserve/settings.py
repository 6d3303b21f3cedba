"""The TorchServe LLM-API's environment names, mapped onto the backend's own settings.

LLM-API: MODEL_NAME, MODEL_PATH, MAX_INPUT_TOKENS, MAX_NEW_TOKENS, DTYPE, QUANTIZATION, END_OF_STREAM_TOKEN.
TorchServe's config.properties keys (also as TS_<KEY>, as TorchServe reads them): inference_address,
management_address, metrics_address, grpc_inference_port, max_request_size, max_response_size,
default_response_timeout. Every other backend setting (device, KV cache, ...) keeps its own name.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator

from ..settings import BackendSettings

# DTYPE (a torch dtype name) -> the inference precision OpenVINO computes in.
# bfloat16 is the backend's "auto": bf16 where the CPU computes it fast (AMX), f32 elsewhere, where bf16 is slower.
PRECISION_OF_DTYPE = {"bfloat16": "auto", "float16": "f16", "float32": "f32", "auto": "auto"}
# QUANTIZATION -> the weights the engine compresses to at load (NNCF; cached under cache_dir).
WEIGHTS_OF_QUANTIZATION = {"none": None, "8bit": "int8", "4bit": "int4"}


def _names(*names: str) -> AliasChoices:
    return AliasChoices(*names, *(f"TS_{name.upper()}" for name in names if name.islower()))


class TorchServeSettings(BackendSettings):
    model_name: str | None = Field(None, validation_alias=_names("model_name", "MODEL_NAME"),
                                   description="The name clients use in /predictions/{model_name}.")
    max_input_tokens: int = Field(2048, ge=1, validation_alias=_names("max_input_tokens", "MAX_INPUT_TOKENS"))
    max_new_tokens: int = Field(2048, ge=1, validation_alias=_names("max_new_tokens", "MAX_NEW_TOKENS"))
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = Field(
        "bfloat16", validation_alias=_names("dtype", "DTYPE"),
        description="bfloat16: bf16 on CPUs with AMX, f32 on others (faster there); float16: f16; float32: f32.")
    quantization: Literal["none", "8bit", "4bit"] = Field(
        "none", validation_alias=_names("quantization", "QUANTIZATION"),
        description="8bit / 4bit: int8 / int4 weights, compressed at load (a GGUF model keeps its own).")
    end_of_stream_token: str = Field("<|endoftext|>", validation_alias=_names("end_of_stream_token",
                                                                              "END_OF_STREAM_TOKEN"))
    inference_address: str = Field("http://127.0.0.1:8080", validation_alias=_names("inference_address"))
    management_address: str = Field("http://127.0.0.1:8081", validation_alias=_names("management_address"))
    metrics_address: str = Field("http://127.0.0.1:8082", validation_alias=_names("metrics_address"))
    grpc_inference_port: int = Field(7070, ge=0, le=65535, validation_alias=_names("grpc_inference_port"))
    max_request_size: int = Field(6553500, ge=1024, validation_alias=_names("max_request_size"),
                                  description="Largest request body, in bytes (TorchServe's default).")
    max_response_size: int = Field(6553500, ge=1024, validation_alias=_names("max_response_size"),
                                   description="Largest response, in bytes: a stream is ended beyond it.")
    default_response_timeout: float = Field(120, gt=0, validation_alias=_names("default_response_timeout"),
                                            description="Seconds a generation may run; then it is ended and its KV "
                                            "cache freed.")

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
