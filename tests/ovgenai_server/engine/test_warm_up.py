"""The engine's warm-up before it says it is ready: one short request through the real pipeline, run to its end."""

from __future__ import annotations

import numpy as np

from ovgenai_server.engine.process import build_pipeline, warm_up
from ovgenai_server.model_specs import load_model_specs
from ovgenai_server.settings import BackendSettings
from tests.support.servers import DEFAULT_MODEL, MODELS


def test_the_warm_up_leaves_the_pipeline_idle_and_serving(tmp_path):
    import openvino
    import openvino_genai

    spec = load_model_specs(BackendSettings(model=str(MODELS / DEFAULT_MODEL), cache_dir=tmp_path, autotune=False))[0]
    pipeline = build_pipeline(spec)
    assert warm_up(pipeline) > 0
    assert not pipeline.has_non_finished_requests()
    # The first request after it is served as any other: its own id, its own tokens.
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 3
    config.ignore_eos = True
    handle = pipeline.add_request(0, openvino.Tensor(np.asarray([[1, 504, 3575]], dtype=np.int64)), config)
    while pipeline.has_non_finished_requests():
        pipeline.step()
    [output] = handle.read_all()
    assert len(output.generated_ids) == 3
