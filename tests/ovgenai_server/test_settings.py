"""The backend's settings from the environment: PLUGIN_CONFIG as compose and users set it, and the vLLM OpenVINO
backend's variable names (VLLM_OPENVINO_*)."""

from __future__ import annotations

import pydantic
import pytest

from ovgenai_server.settings import BackendSettings


def test_plugin_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("PLUGIN_CONFIG", "")  # compose's ${VAR:-} when the user set nothing
    assert BackendSettings().plugin_config == {}
    monkeypatch.setenv("PLUGIN_CONFIG", '{"NUM_STREAMS": 1}')
    assert BackendSettings().plugin_config == {"NUM_STREAMS": 1}
    monkeypatch.setenv("PLUGIN_CONFIG", "{bad")
    with pytest.raises(pydantic.ValidationError, match="plugin_config"):
        BackendSettings()


def test_seed_environment_names(monkeypatch):
    monkeypatch.setenv("VLLM_OPENVINO_DEVICE", "gpu.1")
    monkeypatch.setenv("VLLM_OPENVINO_KVCACHE_SPACE", "8")
    monkeypatch.setenv("VLLM_OPENVINO_CPU_KV_CACHE_PRECISION", "u8")
    monkeypatch.setenv("VLLM_OPENVINO_ENABLE_QUANTIZED_WEIGHTS", "true")
    settings = BackendSettings()
    assert (settings.device, settings.cache_size, settings.kv_cache_precision) == ("GPU.1", 8, "u8")
    assert settings.enable_quantized_weights
