"""The KV cache's size when the settings leave it to the server."""

from __future__ import annotations

from ovgenai_server.engine.contract.kv_cache import (
    GB,
    auto_cache_gb,
    available_memory,
    memory_refusal,
)

MEMINFO = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20971520 kB\n"  # 20 GiB


def test_a_containers_memory_limit_counts(tmp_path):
    assert available_memory(MEMINFO, tmp_path / "no-cgroup") == 20 * GB
    (tmp_path / "memory.max").write_text(f"{8 * GB}\n")
    (tmp_path / "memory.current").write_text(f"{2 * GB}\n")
    assert available_memory(MEMINFO, tmp_path) == 6 * GB
    (tmp_path / "memory.max").write_text("max\n")
    assert available_memory(MEMINFO, tmp_path) == 20 * GB


def test_a_small_model_gets_what_its_batch_can_use_a_large_one_a_share_of_memory():
    # 11,520 bytes per token x 256 sequences x 2,048 tokens = 5.6 GiB; a quarter of 40 GiB is more.
    assert auto_cache_gb(11_520, None, 256, 2048, available=40 * GB, weights=0) == 5
    # an 8B model (64 KiB per token) wants 32 GiB: capped at a quarter of (20 GiB - 16 GiB of weights)
    assert auto_cache_gb(65_536, "u8", 256, 2048, available=20 * GB, weights=16 * GB) == 1
    assert auto_cache_gb(65_536, "u8", 256, 2048, available=64 * GB, weights=16 * GB) == 12
    # f16 doubles a token's bytes; an unknown footprint takes the share
    assert auto_cache_gb(11_520, "f16", 256, 2048, available=40 * GB, weights=0) == 10
    assert auto_cache_gb(None, None, 256, 2048, available=40 * GB, weights=0) == 10


def test_a_model_that_does_not_fit_is_refused_with_its_numbers(tmp_path):
    (tmp_path / "openvino_model.bin").write_bytes(b"\0" * 1024)
    assert memory_refusal(tmp_path, 2.0, "CPU", available=4 * GB) is None
    refusal = memory_refusal(tmp_path, 8.0, "CPU", available=4 * GB)
    assert refusal == "it needs about 8.0 GiB (weights 0.0 GiB, KV cache 8.0 GiB) and 4.0 GiB are available"
    assert memory_refusal(tmp_path, 0, "CPU", available=GB // 2) is not None  # an unset cache takes 1 GB at least
    assert memory_refusal(tmp_path, 8.0, "GPU", available=GB) is None  # the GPU's driver says for itself
