"""The CPU precision choice, under both branches (with and without AMX) on any machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from ovgenai_common.cpu import cpuinfo_has_amx, default_properties, precision_hint
from ovgenai_server.models.specs import base_spec
from ovgenai_server.settings import BackendSettings
from ovgenai_services.embedding.settings import EmbeddingSettings

AMX_FLAGS = "flags\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
NO_AMX_FLAGS = "flags\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16\n"


def test_cpuinfo_parsing():
    assert cpuinfo_has_amx(AMX_FLAGS) and not cpuinfo_has_amx(NO_AMX_FLAGS)


@pytest.mark.parametrize(
    ("device", "precision", "has_amx", "expected"),
    [
        ("CPU", "auto", False, "f32"),  # bf16 without AMX is slower than f32
        ("CPU", "auto", True, None),  # OpenVINO's own choice (bf16) on AMX
        ("GPU", "auto", False, None),
        ("CPU", "bf16", False, "bf16"),  # the AMX branch forced on a CPU without AMX
        ("CPU", "f32", True, "f32"),  # the no-AMX branch forced on an AMX CPU
        ("GPU", "f16", True, "f16"),
    ],
)
def test_precision_hint_both_branches(device, precision, has_amx, expected):
    assert precision_hint(device, precision, has_amx) == expected


def test_plugin_config_hint_wins_and_others_pass_through():
    chosen = default_properties("CPU", {"INFERENCE_PRECISION_HINT": "bf16", "NUM_STREAMS": 1}, "f32", False)
    assert chosen == {"INFERENCE_PRECISION_HINT": "bf16", "NUM_STREAMS": 1}
    assert default_properties("CPU", {"NUM_STREAMS": 1}, "auto", True) == {"NUM_STREAMS": 1}
    assert default_properties("CPU", None, "auto", False) == {"INFERENCE_PRECISION_HINT": "f32"}


def test_inference_precision_setting_reaches_backend_and_embedding(monkeypatch):
    monkeypatch.setenv("INFERENCE_PRECISION", "bf16")
    assert BackendSettings().inference_precision == "bf16"
    assert EmbeddingSettings().inference_precision == "bf16"
    spec = base_spec(BackendSettings(), "m", Path("m.gguf"))
    assert spec.properties()["INFERENCE_PRECISION_HINT"] == "bf16"
    monkeypatch.setenv("INFERENCE_PRECISION", "f64")
    with pytest.raises(ValueError, match="inference_precision"):
        BackendSettings()


def test_computed_precision_is_read_back_from_openvino():
    """f32 stays f32 everywhere; a bf16 hint becomes bf16 exactly where the CPU plugin lists BF16 among its
    capabilities (AVX-512 and up), f32 on AVX2-only CPUs."""
    import openvino

    from ovgenai_common.cpu import computed_precision

    assert computed_precision("CPU", "f32") == "f32"
    capable = "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    assert computed_precision("CPU", "bf16") == ("bf16" if capable else "f32")
