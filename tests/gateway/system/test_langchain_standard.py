"""LangChain's standard chat-model integration suite (langchain-tests) against the gateway's OpenAI chat route through
ChatOpenAI (model `chatqna`), with documents ingested, run in its own venv (tests/clients/langchain/gateway_chat.py
declares what the gateway claims)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import gateway_env
from tests.gateway.facts import documents
from tests.support.client_suites import run_pytest
from tests.support.servers import RemoteServer


@pytest.fixture(scope="module")
def gateway(embedding_service, llm_service, tmp_path_factory):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path_factory.mktemp("gateway-data"))
    with RemoteServer("microservices.gateway", env=env) as server:
        files = [("files", (name, body.encode(), "text/plain")) for name, body in documents().items()]
        response = httpx.post(server.url + "/v1/dataprep/ingest", files=files, timeout=120)
        assert response.status_code == 200, response.text
        yield server


def test_the_standard_chat_model_suite_passes(gateway):
    run_pytest("langchain-tests", "langchain/gateway_chat.py", CLIENT_SUITE_BASE_URL=gateway.url + "/v1",
               CLIENT_SUITE_MODEL="chatqna")
