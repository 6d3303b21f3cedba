"""compose/compose.yaml, rendered as compose renders it: ports on 127.0.0.1 unless HOST_BIND says otherwise, the
one API_KEY reaching every service and every key a service sends downstream, memory limits, Chroma unpublished,
and images that still listen on every interface inside their container."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import yaml

from tests.deploy.test_compose_equivalence import COMPOSE, env_example, interpolate
from tests.support.servers import ROOT

# Each outgoing key a service sends, and the setting naming where it sends it.
OUTGOING = {
    "llm": {"OPENAI_API_KEY": "vLLM_ENDPOINT"},
    "chatqna-gateway": {"LLM_API_KEY": "LLM_SERVER_ENDPOINT", "EMBEDDING_API_KEY": "EMBEDDING_SERVER_ENDPOINT",
                        "RERANK_API_KEY": None},  # no reranker by default; the embedding service serves one
}


def rendered(**variables: str) -> dict:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), variables)["services"]


def servers(services: dict) -> dict:
    """The stack's own servers (built from this project, with a healthcheck): not Chroma, not the models job."""
    return {name: s for name, s in services.items() if "healthcheck" in s and "build" in s}


@pytest.mark.parametrize("variables", [{}, env_example()], ids=["defaults", "env-example"])
def test_ports_are_published_on_loopback_by_default(variables):
    services = rendered(**variables)
    published = {name: s["ports"] for name, s in services.items() if s.get("ports")}
    assert set(published) == {"vllm-openvino", "llm", "embedding", "chatqna-gateway"}  # not Chroma, not models
    for name, ports in published.items():
        for port in ports:
            assert port.startswith("127.0.0.1:") and port.count(":") == 2, (name, port)


def test_host_bind_publishes_on_the_address_it_names():
    for service in rendered(HOST_BIND="0.0.0.0").values():
        for port in service.get("ports", []):
            assert port.startswith("0.0.0.0:")


def test_api_key_reaches_every_service_and_every_key_it_sends():
    services = rendered(API_KEY="k-123")
    for name, service in servers(services).items():
        assert service["environment"]["SERVICE_API_KEY"] == "k-123", name
        for key, endpoint in OUTGOING.get(name, {}).items():
            assert service["environment"][key] == "k-123", (name, key)
            if endpoint:  # ... and that is the key the service it calls requires
                callee = urlsplit(service["environment"][endpoint]).hostname
                assert services[callee]["environment"]["SERVICE_API_KEY"] == "k-123", (name, callee)


def test_without_api_key_no_service_requires_one():
    for name, service in servers(rendered()).items():
        assert service["environment"]["SERVICE_API_KEY"] == "", name


def test_every_service_has_a_memory_limit():
    for name, service in rendered(**env_example()).items():
        assert re.fullmatch(r"\d+[kmg]", str(service["mem_limit"])), name


def test_images_listen_on_every_interface_inside_their_container():
    """A service binds loopback by default, which inside a container nobody could reach: the images say 0.0.0.0."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
    runtime = [stage for stage in stages if stage.split("\n", 1)[0].split(" AS ")[-1].strip() in
               ("runtime", "backend-gpu")]
    assert len(runtime) == 2 and all("HOST=0.0.0.0" in stage for stage in runtime)
