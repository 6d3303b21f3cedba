"""The LLM-API's environment names reach the backend's own settings."""

from __future__ import annotations

import asyncio

import pytest

from ovgenai_server.torchserve.http import timed
from ovgenai_server.torchserve.requests import from_bytes
from ovgenai_server.torchserve.settings import TorchServeSettings


def test_the_llm_apis_environment_configures_the_backend(monkeypatch):
    monkeypatch.setenv("MODEL_NAME", "llama2-7b-chat")
    monkeypatch.setenv("MODEL_PATH", "/models/llama")
    monkeypatch.setenv("DTYPE", "float16")
    monkeypatch.setenv("QUANTIZATION", "4bit")
    monkeypatch.setenv("TS_INFERENCE_ADDRESS", "http://127.0.0.1:9080")
    monkeypatch.setenv("MAX_REQUEST_SIZE", "100000")
    settings = TorchServeSettings()
    backend = settings.backend()
    assert (backend.served_model_name, backend.model) == ("llama2-7b-chat", "/models/llama")
    assert (backend.inference_precision, backend.enable_quantized_weights, backend.quantized_weights) == (
        "f16", True, "int4")
    assert (backend.host, backend.port, backend.max_request_bytes) == ("127.0.0.1", 9080, 100000)


@pytest.mark.parametrize(("dtype", "quantization", "precision", "quantized"),
                         [("bfloat16", "None", "auto", False), ("float32", "8bit", "f32", True)])
def test_dtype_and_quantization_defaults(monkeypatch, dtype, quantization, precision, quantized):
    monkeypatch.setenv("DTYPE", dtype)
    monkeypatch.setenv("QUANTIZATION", quantization)
    backend = TorchServeSettings().backend()
    assert backend.inference_precision == precision and backend.enable_quantized_weights is quantized
    assert TorchServeSettings().end_of_stream_token == "<|endoftext|>"


def test_grpc_input_values_are_text_or_json():
    assert from_bytes({"text": b"42", "max_new_tokens": b"42", "do_sample": b"true", "stop": b"END"}) == {
        "text": "42", "max_new_tokens": 42, "do_sample": True, "stop": "END"}


async def test_the_response_timeout_closes_the_generation():
    closed = asyncio.Event()

    async def endless():
        try:
            while True:
                yield "x"
                await asyncio.sleep(0.01)
        finally:
            closed.set()  # the backend's stream aborts its engine request here

    received = [text async for text in timed(endless(), 0.1)]
    assert received and closed.is_set()


def test_a_models_own_response_timeout_wins(tmp_path):
    from ovgenai_server.torchserve.requests import response_timeout

    settings = TorchServeSettings(default_response_timeout=120)
    (tmp_path / "model-config.yaml").write_text("minWorkers: 1\nresponseTimeout: 7\n")
    assert response_timeout(tmp_path, settings) == 7
    assert response_timeout(tmp_path / "other", settings) == 120
    assert response_timeout(None, settings) == 120  # a model without a folder of its own


CONFIG_PROPERTIES = """# TorchServe's config.properties, as its guides write it
inference_address=http://0.0.0.0:8085
management_address=http://0.0.0.0:8086
metrics_address: http://0.0.0.0:8087
grpc_inference_port = 7071
max_request_size=1000000
default_response_timeout=300
model_store=/home/model-server/model-store
"""


@pytest.fixture
def ts_config(tmp_path, monkeypatch):
    for name in ("PORT", "HOST", "TS_INFERENCE_ADDRESS", "MAX_REQUEST_BYTES", "TS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config.properties"
    path.write_text(CONFIG_PROPERTIES)
    return path


@pytest.mark.parametrize("given_by", ["flag", "environment"])
def test_config_properties_is_read_from_the_flag_or_the_environment(ts_config, monkeypatch, given_by):
    from pydantic_settings import CliApp

    if given_by == "flag":
        settings = CliApp.run(TorchServeSettings, cli_args=["--ts-config", str(ts_config)])
    else:
        monkeypatch.setenv("TS_CONFIG_FILE", str(ts_config))
        settings = TorchServeSettings()
    assert (settings.management_address, settings.metrics_address) == ("http://0.0.0.0:8086", "http://0.0.0.0:8087")
    assert (settings.grpc_inference_port, settings.default_response_timeout) == (7071, 300)
    backend = settings.backend()
    assert (backend.host, backend.port, backend.max_request_bytes) == ("0.0.0.0", 8085, 1000000)


def test_flags_and_the_environment_win_over_the_file(ts_config, monkeypatch):
    from pydantic_settings import CliApp

    monkeypatch.setenv("TS_CONFIG_FILE", str(ts_config))
    monkeypatch.setenv("TS_MANAGEMENT_ADDRESS", "http://127.0.0.1:9081")
    monkeypatch.setenv("PORT", "9000")  # the backend's own name for the inference port wins over the file's too
    monkeypatch.setenv("MAX_REQUEST_BYTES", "2048")
    settings = CliApp.run(TorchServeSettings, cli_args=["--grpc_inference_port", "7999"])
    assert settings.management_address == "http://127.0.0.1:9081" and settings.grpc_inference_port == 7999
    assert settings.metrics_address == "http://0.0.0.0:8087"  # what only the file sets
    backend = settings.backend()
    assert (backend.host, backend.port, backend.max_request_bytes) == ("127.0.0.1", 9000, 2048)


def test_without_a_file_the_defaults_hold(ts_config):  # noqa: ARG001 - a clean environment
    settings = TorchServeSettings()
    assert settings.management_address == "http://127.0.0.1:8081" and settings.grpc_inference_port == 7070


def test_an_unreadable_file_is_said_so(tmp_path, monkeypatch):
    from pydantic_settings import SettingsError

    monkeypatch.setenv("TS_CONFIG_FILE", str(tmp_path / "missing.properties"))
    with pytest.raises(SettingsError, match="Cannot read TorchServe's config file .*missing.properties"):
        TorchServeSettings()


def test_a_transformers_checkpoint_is_told_from_ir_and_repositories(tmp_path):
    import json

    from ovgenai_server.torchserve.checkpoint import is_checkpoint, weight_format

    checkpoint, ir, repository = (tmp_path / name for name in ("hf", "ir", "repo"))
    for folder in (checkpoint, ir, repository):
        folder.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert not is_checkpoint(checkpoint)  # no weights yet
    (checkpoint / "model.safetensors").write_bytes(b"0")
    assert is_checkpoint(checkpoint)
    (ir / "config.json").write_text("{}")
    (ir / "openvino_model.xml").write_text("<net/>")
    (ir / "model.safetensors").write_bytes(b"0")
    (repository / "config.json").write_text(json.dumps({"mediapipe_config_list": []}))
    (repository / "model.safetensors").write_bytes(b"0")
    assert not is_checkpoint(ir) and not is_checkpoint(repository)
    assert [weight_format(d, q) for d, q in [("bfloat16", "none"), ("float32", "none"), ("float16", "4bit"),
                                             ("bfloat16", "8bit")]] == ["fp16", "fp32", "int4", "int8"]
