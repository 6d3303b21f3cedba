"""The engine process's warm-up, on a real pipeline: it leaves the pipeline idle and serving."""

from __future__ import annotations

import numpy as np
import pytest

from ovgenai_server.engine.engine_process.entry import build_pipeline, loaded_path, warm_up
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings
from tests.support.servers import DEFAULT_MODEL, MODELS


@pytest.mark.parametrize("prompt_lookup", [False, True], ids=["plain", "prompt-lookup"])
def test_the_warm_up_leaves_the_pipeline_idle_and_serving(tmp_path, prompt_lookup):
    import openvino
    import openvino_genai

    spec = load_model_specs(BackendSettings(model=str(MODELS / DEFAULT_MODEL), cache_dir=tmp_path, autotune=False,
                                            prompt_lookup=prompt_lookup))[0]
    assert spec.prompt_lookup is prompt_lookup
    pipeline = build_pipeline(spec, loaded_path(spec))
    # A prompt lookup pipeline refuses a request without its parameters: the warm-up is shaped as serving's.
    assert warm_up(pipeline, spec) > 0
    assert not pipeline.has_non_finished_requests()
    # The first request after it is served as any other: its own id, its own tokens.
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 3
    config.ignore_eos = True
    if prompt_lookup:
        config.num_assistant_tokens, config.max_ngram_size = 5, 3
    handle = pipeline.add_request(0, openvino.Tensor(np.asarray([[1, 504, 3575]], dtype=np.int64)), config)
    while pipeline.has_non_finished_requests():
        pipeline.step()
    [output] = handle.read_all()
    assert len(output.generated_ids) == 3
