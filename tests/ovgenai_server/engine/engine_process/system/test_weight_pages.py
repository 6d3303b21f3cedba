"""The model file's pages leave the engine's memory after the warm-up, on a real pipeline, and its answers stay
the same."""

from __future__ import annotations

from ovgenai_server.engine.engine_process.entry import build_pipeline, loaded_path, warm_up
from ovgenai_server.engine.engine_process.weight_pages import release_model_pages
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings
from tests.ovgenai_server.engine.engine_process.test_weight_pages import greedy, resident_kb
from tests.support.servers import DEFAULT_MODEL, MODELS


def test_the_weights_file_leaves_memory_after_the_warm_up_and_the_answers_stay(tmp_path):
    spec = load_model_specs(BackendSettings(model=str(MODELS / DEFAULT_MODEL), cache_dir=tmp_path,
                                            autotune=False))[0]
    folder = loaded_path(spec)
    pipeline = build_pipeline(spec, folder)
    warm_up(pipeline, spec)
    before = greedy(pipeline, 1)
    resident = resident_kb(folder)
    weights_kb = (folder / "openvino_model.bin").stat().st_size >> 10
    assert resident > weights_kb // 2  # compiling read the weights through the mapping

    released = release_model_pages(folder)
    assert released >= weights_kb << 10
    assert resident_kb(folder) < weights_kb // 20
    assert greedy(pipeline, 2) == before
    # Inference computes from the compiled model's own copy: the file is hardly read again.
    assert resident_kb(folder) < weights_kb // 10
