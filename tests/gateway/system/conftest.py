"""The gateway as most of its system tests meet it: on the real embedding service and LLM microservice, with the
invented documents of tests/gateway/facts.py ingested (one per test module)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import gateway_env
from tests.gateway.facts import documents
from tests.support.servers import RemoteServer


@pytest.fixture(scope="module")
def ingested_gateway(embedding_service, llm_service, tmp_path_factory):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path_factory.mktemp("gateway-data"))
    with RemoteServer("ovgenai_services.gateway", env=env) as server:
        files = [("files", (name, body.encode(), "text/plain")) for name, body in documents().items()]
        response = httpx.post(server.url + "/v1/dataprep/ingest", files=files, timeout=120)
        assert response.status_code == 200, response.text
        yield server
