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
    from types import SimpleNamespace

    from ovgenai_server.torchserve.requests import response_timeout

    settings = TorchServeSettings(default_response_timeout=120)
    (tmp_path / "model-config.yaml").write_text("minWorkers: 1\nresponseTimeout: 7\n")
    assert response_timeout(SimpleNamespace(spec=SimpleNamespace(folder=tmp_path)), settings) == 7
    assert response_timeout(SimpleNamespace(spec=SimpleNamespace(folder=tmp_path / "other")), settings) == 120
    assert response_timeout(SimpleNamespace(), settings) == 120
