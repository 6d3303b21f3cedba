"""Client libraries nobody on the project wrote, each against the backend from its own venv (tests/clients/sdks,
pinned in tests/clients/sdks.txt): LiteLLM without drop_params, OpenAI's Agents SDK through Chat Completions and the
Responses API, LlamaIndex's OpenAILike."""

from __future__ import annotations

import pytest

from tests.support.client_suites import run_pytest


@pytest.mark.parametrize("module", ["litellm_client.py", "agents_client.py", "llama_index_client.py"])
def test_the_client_library_works_against_the_backend(backend, default_model, module):
    run_pytest("sdks", f"sdks/{module}", timeout=300, CLIENT_SUITE_BASE_URL=backend.url + "/v1",
               CLIENT_SUITE_MODEL=default_model)
