"""TorchServe's settings (torchserve/settings.py): the LLM-API's environment names and config.properties reach the
backend's own settings, and which wins when both TorchServe's and the backend's name are given."""

from __future__ import annotations

import pytest

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


def test_torchserves_names_win_then_the_backends_then_torchserves_defaults():
    assert TorchServeSettings().backend().port == 8080
    assert TorchServeSettings(port=9000, max_request_bytes=4096).backend().port == 9000
    assert TorchServeSettings(port=9000, max_request_bytes=4096).backend().max_request_bytes == 4096
    both = TorchServeSettings(port=9000, inference_address="http://127.0.0.1:9100", max_request_size=8192,
                              max_request_bytes=4096).backend()
    assert (both.host, both.port, both.max_request_bytes) == ("127.0.0.1", 9100, 8192)
