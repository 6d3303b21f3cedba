"""The engine loop on the real pipeline: a request the engine itself refuses fails alone, with the engine's reason
and none of its build's source paths, and the engine goes on serving the others.

The API process refuses everything it knows the engine would (request/sampling.py, request/structured_output.py), so no
served request reaches this path today; it stays as the engine's own guard for whatever validation does not foresee."""

from __future__ import annotations

import os

from ovgenai_server.engine.contract.messages import AddRequest
from ovgenai_server.engine.contract.types import GenerationParams, TokenPrompt
from ovgenai_server.engine.engine_process.entry import build_pipeline, loaded_path
from ovgenai_server.engine.engine_process.loop import EngineLoop
from ovgenai_server.models.specs import load_model_specs
from ovgenai_server.settings import BackendSettings
from tests.support.servers import DEFAULT_MODEL, MODELS

# Starts processes, servers or real pipelines: the system tier (not make test-unit).


def test_a_request_the_engine_refuses_fails_alone(tmp_path):
    spec = load_model_specs(BackendSettings(model=str(MODELS / DEFAULT_MODEL), cache_dir=tmp_path, autotune=False,
                                            prompt_lookup=False))[0]
    pipeline = build_pipeline(spec, loaded_path(spec))
    loop = EngineLoop(pipeline, [2], commands=None, send=None, decoder=None, parent=os.getpid(), gate=None)
    refused = GenerationParams(max_new_tokens=3, repetition_penalty=0.0)  # 0 is no penalty the engine takes
    served = GenerationParams(max_new_tokens=3, ignore_eos=True)
    steps = []
    prompt = TokenPrompt([1, 504, 3575])
    assert loop._apply([AddRequest(1, prompt, refused), AddRequest(2, prompt, served)], steps)
    [failed] = steps
    assert failed.request_id == 1 and failed.finished
    assert "repetition_penalty" in failed.error and ".cpp" not in failed.error and "failed at" not in failed.error
    assert set(loop.handles) == {2}
    tokens = 0
    while pipeline.has_non_finished_requests():
        pipeline.step()
        steps = []
        loop._collect(steps)
        tokens += sum(len(seq.token_ids) for step in steps for seq in step.seqs)
    assert tokens == 3
