"""Choosing f32 or bf16 by timing: when the service times them, and which it keeps.

The choice itself is timing, which a test must not depend on; a fake clock makes one candidate slower."""

from __future__ import annotations

import pytest

from ovgenai_services.embedding.precision import SAMPLE, faster_precision, worth_timing


def native_bf16() -> str:
    return "bf16"


@pytest.mark.parametrize(
    ("device", "precision", "plugin_config", "has_amx", "bf16_computes_in", "expected"),
    [
        ("CPU", "auto", {}, False, "bf16", True),  # AVX512_BF16 without AMX: a real choice
        ("CPU", "auto", {}, True, "bf16", False),  # AMX: OpenVINO's bf16 default stands
        ("CPU", "auto", {}, False, "f32", False),  # AVX2-only: a bf16 hint computes in f32
        ("CPU", "f32", {}, False, "bf16", False),  # the user chose
        ("CPU", "auto", {"INFERENCE_PRECISION_HINT": "f32"}, False, "bf16", False),  # the plugin config chose
        ("GPU", "auto", {}, False, "bf16", False),
    ],
)
def test_times_only_where_auto_leaves_a_real_choice(device, precision, plugin_config, has_amx, bf16_computes_in,
                                                      expected):
    assert worth_timing(device, precision, plugin_config, has_amx, lambda: bf16_computes_in) is expected


def test_a_failed_probe_keeps_the_default():
    def broken() -> str:
        raise RuntimeError("no CPU plugin")

    assert worth_timing("CPU", "auto", {}, False, broken) is False


@pytest.mark.parametrize("slow", ["bf16", "f32"])
def test_keeps_the_faster_pipeline_and_drops_the_other(slow):
    now = [0.0]
    loaded: list[str] = []
    calls: dict[str, int] = {}

    def load(hint):
        loaded.append(hint)
        return hint  # the pipeline stands for its hint

    def embed(pipeline, texts):
        assert texts == SAMPLE
        calls[pipeline] = calls.get(pipeline, 0) + 1
        now[0] += 0.3 if pipeline == slow else 0.1

    chosen, pipeline, rates = faster_precision(load, embed, rounds=3, clock=lambda: now[0])
    fast = "f32" if slow == "bf16" else "bf16"
    assert chosen == pipeline == fast
    assert sorted(loaded) == ["bf16", "f32"]
    assert calls == {"bf16": 4, "f32": 4}  # a warm-up call each, then the timed rounds
    assert rates[fast] == pytest.approx(len(SAMPLE) / 0.1) and rates[slow] == pytest.approx(len(SAMPLE) / 0.3)


def test_a_precision_the_model_cannot_run_in_is_left_out():
    def load(hint):
        if hint == "bf16":
            raise RuntimeError("no bf16 kernel for an op")
        return hint

    chosen, pipeline, rates = faster_precision(load, lambda *_: None)
    assert chosen == pipeline == "f32" and rates == {}


def test_a_model_that_runs_in_neither_stops_with_the_f32_reason():
    def load(hint):
        raise RuntimeError(f"Unsupported property NOT_A_PROPERTY ({hint})")

    with pytest.raises(RuntimeError, match=r"NOT_A_PROPERTY \(f32\)"):
        faster_precision(load, lambda *_: None)
