"""Request threads that tokenize together for the first time in a process do not deadlock it: the backend's
prompt builder and the embedding service use their tokenizer once, on the loading thread, before any request
(ovgenai_common/openvino_threads.py). Without that, four threads making their first call together hang most fresh
processes; each case runs in a fresh process, and a hang is a timeout of that process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.servers import MODELS, ROOT

# Starts processes, servers or real pipelines: the system tier (not make test-unit).

FIRST_USE_TOGETHER = """
import sys, threading
sys.setswitchinterval(1e-6)  # hand the GIL over as often as possible: the race is then almost certain
{load}
start = threading.Barrier(4)
def first_use():
    start.wait()
    {use}
threads = [threading.Thread(target=first_use) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("all four threads finished")
"""

LOADERS = {
    "backend": (
        "from ovgenai_server.engine.api_process.prompt_builder import OpenVINOPromptBuilder\n"
        "from ovgenai_server.models.specs import load_model_specs\n"
        "from ovgenai_server.settings import BackendSettings\n"
        "spec = load_model_specs(BackendSettings(model=sys.argv[1]))[0]\n"
        "prompts = OpenVINOPromptBuilder(spec.path, spec.folder, spec.max_context())",
        "prompts.tokenize('The canal lock opens at dawn. ' * 50)",
    ),
    "embedding": (
        "from ovgenai_services.embedding.model import load_tokenizer\n"
        "tokenizer = load_tokenizer(sys.argv[2])",
        "tokenizer.encode(['The canal lock opens at dawn. ' * 50]).attention_mask.data.sum()",
    ),
}


@pytest.mark.parametrize("service", LOADERS)
@pytest.mark.parametrize("attempt", range(3))
def test_first_tokenizer_calls_from_four_threads_at_once_finish(service, attempt):  # noqa: ARG001 - repeated
    load, use = LOADERS[service]
    code = FIRST_USE_TOGETHER.format(load=load, use=use)
    embedding = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
    try:
        result = subprocess.run([sys.executable, "-c", code, str(MODELS), str(embedding)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'dependency'}"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {service}'s first tokenizer calls from four threads deadlocked the process")
    assert result.returncode == 0 and "all four threads finished" in result.stdout, result.stderr[-2000:]
