"""Client libraries nobody on the project wrote, each against the backend from its own venv (tests/clients/sdks,
pinned in tests/clients/sdks.txt): LiteLLM without drop_params, OpenAI's Agents SDK through Chat Completions and the
Responses API, LlamaIndex's OpenAILike; and vLLM's benchmark client (tests/clients/vllm_bench, pinned in
tests/clients/vllm.txt) on every generation API and on the embedding service."""

from __future__ import annotations

import pytest

from ovgenai_common.names import DEFAULT_EMBEDDING
from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir
from tests.support.client_suites import client_env, program, run, run_pytest
from tests.support.servers import MODELS, ROOT


@pytest.mark.parametrize("module", ["litellm_client.py", "agents_client.py", "llama_index_client.py"])
def test_the_client_library_works_against_the_backend(backend, default_model, module):
    run_pytest("sdks", f"sdks/{module}", timeout=300, CLIENT_SUITE_BASE_URL=backend.url + "/v1",
               CLIENT_SUITE_MODEL=default_model)


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory, default_model):  # noqa: ARG001 - the model's package is installed with it
    """The default model's tokenizer as a Hugging Face folder, built from its GGUF: what `vllm bench serve
    --tokenizer` names (a user would name the model's hub id)."""
    out = tmp_path_factory.mktemp("hf") / "tokenizer"
    run([program("vllm"), ROOT / "bench/hf_model.py", "--tokenizer-only", "--out", out,
         "--gguf", package_dir(LLM_PACKAGE) / LLM_FILE], ROOT, client_env(), timeout=120)
    return out


def test_vllms_benchmark_client_measures_every_api(backend, embedding_service, default_model, hf_tokenizer):
    run_pytest("vllm", "vllm_bench/bench_serve_client.py", timeout=600, VLLM_NO_USAGE_STATS="1",
               CLIENT_SUITE_BASE_URL=backend.url, CLIENT_SUITE_MODEL=default_model,
               CLIENT_SUITE_TOKENIZER=str(hf_tokenizer), CLIENT_SUITE_EMBEDDING_URL=embedding_service.url,
               CLIENT_SUITE_EMBEDDING_MODEL=DEFAULT_EMBEDDING,
               CLIENT_SUITE_EMBEDDING_TOKENIZER=str(MODELS / DEFAULT_EMBEDDING))
