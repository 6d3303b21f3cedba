"""Autotune's choices, its cache, and its budget; the tests marked system run the sweep on the real engine over the
default model, the others need only a model folder's files (autotune's cache is keyed by them)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ovgenai_server.engine.contract.tuning import AutotunePlan, Trial, Tuning
from ovgenai_server.engine.engine_process import autotune
from ovgenai_server.engine.engine_process.autotune import NOISE_MARGIN, candidates, choose, tuned
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings
from tests.support.servers import DEFAULT_MODEL, MODELS

BOTH = ("max_num_batched_tokens", "kv_cache_precision")


def _folder(tmp_path) -> Path:
    """A model folder of the test's own: its files, not a model that loads."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    for name in ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        (folder / name).write_text(name)
    return folder


def tuned_spec(tmp_path, model: Path | None = None, **settings):
    """The spec of `model` (default: the prepared default model, for the sweeps on the real engine)."""
    model = model or MODELS / DEFAULT_MODEL
    return load_model_specs(BackendSettings(model=str(model), cache_dir=tmp_path / "cache", **settings))[0]


def test_candidates_start_with_the_default_and_use_the_engines_16_bit_kv(tmp_path):
    spec = tuned_spec(tmp_path, _folder(tmp_path))
    f32 = candidates(spec, BOTH, "f32")
    assert f32[:2] == [autotune.Candidate(512, None), autotune.Candidate(512, "f16")] and len(f32) == 8
    # A bf16 cache only beside bf16 compute (AMX): an AVX512_BF16 CPU computing in f32 refuses it at load.
    assert {c.kv_cache_precision for c in f32} == {None, "f16"}
    assert {c.kv_cache_precision for c in candidates(spec, BOTH, "bf16")} == {None, "bf16"}
    assert candidates(spec, (), "f32") == [autotune.Candidate(512, None)]


def refusing(refused):
    """The real pipeline builder, except that the engine refuses the candidates `refused` names, as OpenVINO does a
    KV precision its paged attention lacks on the CPU (not every CPU has such a candidate)."""
    def build(spec, candidate):
        if refused(candidate):
            raise RuntimeError("Exception from src/plugins/intel_cpu/.../executor_pa.cpp: expect kvcache type f32")
        return autotune._build(spec, candidate)
    return build


def _trial(tokens: int, seconds: float, kv: str | None = None) -> Trial:
    return Trial(tokens, kv, seconds, 1000.0)


def test_the_default_is_kept_unless_another_is_faster_than_the_noise():
    default = _trial(512, 10.0)
    kept, note = choose([default, _trial(1024, 10.0 / (NOISE_MARGIN - 0.01))])
    assert kept is default and "kept" in note
    faster = _trial(2048, 10.0 / (NOISE_MARGIN + 0.05), "f16")
    chosen, note = choose([default, _trial(1024, 9.9), faster])
    assert chosen is faster and "1.10x" in note
    assert choose([default])[0] is default


def _fake_sweep(calls: list):
    def sweep(_spec, plan):
        calls.append(plan)
        trial = Trial(1024, "f16", 3.0, 2500.0)
        return Tuning(1024, "f16", 2500.0, [Trial(512, None, 4.0, 2000.0), trial], 9.0, "picked", "a CPU")
    return sweep


def test_the_result_is_cached_per_model_and_read_back(tmp_path):
    spec = tuned_spec(tmp_path, _folder(tmp_path))
    calls: list = []
    chosen, tuning = tuned(spec, _fake_sweep(calls))
    assert (chosen.max_num_batched_tokens, chosen.kv_cache_precision) == (1024, "f16") and not tuning.cached
    again, cached = tuned(spec, _fake_sweep(calls))
    assert len(calls) == 1 and cached.cached and cached.prefill_tokens_per_s == 2500.0
    assert (again.max_num_batched_tokens, again.kv_cache_precision) == (1024, "f16")
    # Another budget, or other options fixed, is another measurement.
    tuned(replace(spec, autotune=AutotunePlan(("kv_cache_precision",), 30.0)), _fake_sweep(calls))
    assert len(calls) == 2


def test_a_changed_model_or_a_damaged_cache_file_is_swept_again(tmp_path):
    model = _folder(tmp_path)
    spec = tuned_spec(tmp_path, model)
    calls: list = []
    tuned(spec, _fake_sweep(calls))
    [cached] = (tmp_path / "cache" / "autotune").glob("*.json")
    cached.write_text('{"max_num_batched')
    tuned(spec, _fake_sweep(calls))
    assert len(calls) == 2
    # The model re-exported: a file of it changed.
    (model / "openvino_detokenizer.xml").write_text("openvino_detokenizer.xml, exported again\n")
    tuned(spec, _fake_sweep(calls))
    assert len(calls) == 3


def test_without_a_plan_nothing_is_measured(tmp_path):
    spec = tuned_spec(tmp_path, _folder(tmp_path), autotune=False)
    assert tuned(spec, _fake_sweep([])) == (spec, None)


def test_sweeps_take_turns_and_a_waiting_start_reads_the_result(tmp_path):
    """Two starts of one model at once (two servers, or a repository's models together): one sweeps, the other waits
    for it and reads its result rather than measuring under its load."""
    import threading

    spec = tuned_spec(tmp_path, _folder(tmp_path))
    calls: list = []
    inside = threading.Event()

    def sweep(_spec, plan):
        calls.append(plan)
        overlapped = inside.is_set()
        inside.set()
        inside.wait(0.5)  # time for the other start to come in, were sweeps not taking turns
        assert not overlapped, "two sweeps ran at once"
        return _fake_sweep([])(spec, plan)

    results: list = []
    threads = [threading.Thread(target=lambda: results.append(tuned(spec, sweep)[1])) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and sorted(t.cached for t in results) == [False, True]
