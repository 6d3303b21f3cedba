"""The Kubernetes manifests mean what the README says: models prepared into the volume by an init container,
services that keep Chroma's settings clean, an API key from a Secret on every service, and readiness that keeps
the gateway's endpoints through a backend restart."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import yaml

from ovgenai_common.app import OPEN_PATHS
from tests.support.servers import ROOT

MANIFESTS = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))
DOCUMENTS = [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]
WORKLOADS = {doc["metadata"]["name"]: doc for doc in DOCUMENTS if doc["kind"] in ("Deployment", "StatefulSet")}
SERVICES = {doc["metadata"]["name"]: doc for doc in DOCUMENTS if doc["kind"] == "Service"}
PREPARE = ["python", "-m", "ovgenai_models", "prepare", "--model_repository_path", "/models"]
LLM_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def pod(name: str) -> dict:
    return WORKLOADS[name]["spec"]["template"]["spec"]


def env(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_no_service_variables_are_injected(name):
    """A Service named chroma would inject CHROMA_PORT=tcp://..., which Chroma and the gateway read as settings."""
    assert pod(name)["enableServiceLinks"] is False


@pytest.mark.parametrize("name", ["vllm-openvino", "embedding"])
def test_models_are_prepared_into_the_volume_by_an_init_container(name):
    spec = pod(name)
    [init] = spec["initContainers"]
    assert init["image"] == "opea/models:latest" and init["command"] == PREPARE
    variables = env(init)
    assert variables["LLM_MODEL_ID"]["value"] == LLM_MODEL_ID
    assert variables["EMBEDDING_MODEL_ID"]["value"] == EMBEDDING_MODEL_ID
    assert variables["HF_HOME"]["value"] == "/models/.hf-cache"  # the download cache persists with the models
    assert variables["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True  # only gated models need it
    [init_mount] = init["volumeMounts"]
    assert init_mount["mountPath"] == "/models" and not init_mount.get("readOnly")
    [server_mount] = spec["containers"][0]["volumeMounts"]
    assert server_mount["mountPath"] == "/models" and server_mount["readOnly"] is True
    [volume] = spec["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "models"


def test_the_prepared_models_are_the_served_ones():
    assert env(pod("llm")["containers"][0])["LLM_MODEL"]["value"] == LLM_MODEL_ID
    gateway = env(pod("chatqna-gateway")["containers"][0])
    assert gateway["LLM_MODEL_ID"]["value"] == LLM_MODEL_ID  # the model it asks the LLM microservice for
    assert gateway["EMBEDDING_MODEL_ID"]["value"] == EMBEDDING_MODEL_ID
    embedding_path = env(pod("embedding")["containers"][0])["EMBEDDING_MODEL_PATH"]["value"]
    assert embedding_path == f"/models/{EMBEDDING_MODEL_ID}"
    backend = env(pod("vllm-openvino")["containers"][0])
    assert backend["MODEL_PATH"]["value"] == "/models"  # the repository `prepare` registers both models in


@pytest.mark.parametrize(("name", "variables"), [
    ("vllm-openvino", ["SERVICE_API_KEY"]),
    ("llm", ["SERVICE_API_KEY", "OPENAI_API_KEY"]),
    ("embedding", ["SERVICE_API_KEY"]),
    ("chatqna-gateway", ["SERVICE_API_KEY", "EMBEDDING_API_KEY", "LLM_API_KEY"]),
])
def test_every_service_takes_its_api_key_from_the_secret(name, variables):
    container = env(pod(name)["containers"][0])
    for variable in variables:
        reference = container[variable]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": "ov-genai-api-key", "key": "api-key"}  # required: no pod runs without it


@pytest.mark.parametrize("name", ["chatqna-gateway", "llm"])
def test_readiness_does_not_follow_the_backend(name):
    container = pod(name)["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/live"


def test_no_manual_copying_into_the_volume_is_documented():
    readme = (ROOT / "README.md").read_text()
    for text in [path.read_text() for path in MANIFESTS] + [readme]:
        assert "kubectl cp" not in text
    assert "kubectl create secret generic ov-genai-api-key" in readme  # the Secret every service requires


@pytest.mark.parametrize("name", ["vllm-openvino", "llm", "embedding", "chatqna-gateway"])
def test_probes_and_scraping_need_no_api_key(name):
    """Every service requires the API key, and neither the kubelet nor Prometheus sends it."""
    template = WORKLOADS[name]["spec"]["template"]
    container = template["spec"]["containers"][0]
    paths = {container[probe]["httpGet"]["path"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")
             if probe in container}
    scraped = template["metadata"].get("annotations", {}).get("prometheus.io/path")
    assert paths and paths | ({scraped} if scraped else set()) <= OPEN_PATHS


def _addresses() -> list[tuple[str, str, str, int]]:
    """(workload, variable, host, port) of every downstream address a container is given."""
    found = []
    for name in WORKLOADS:
        for container in pod(name)["containers"]:
            variables = {key: item.get("value") for key, item in env(container).items()}
            for key, value in variables.items():
                if isinstance(value, str) and value.startswith(("http://", "https://")):
                    url = urlsplit(value)
                    found.append((name, key, url.hostname, url.port))
            if "CHROMA_HOST" in variables:
                found.append((name, "CHROMA_HOST", variables["CHROMA_HOST"], int(variables["CHROMA_PORT"])))
    return found


@pytest.mark.parametrize(("name", "variable", "host", "port"), _addresses(), ids=lambda value: str(value))
def test_downstream_addresses_name_a_service_and_its_port(name, variable, host, port):
    assert host in SERVICES, f"{name}: {variable} names no Service"
    assert port in [entry["port"] for entry in SERVICES[host]["spec"]["ports"]]


def test_the_gateway_uses_the_chroma_server():
    variables = {key: item.get("value") for key, item in env(pod("chatqna-gateway")["containers"][0]).items()}
    assert variables["VECTOR_STORE"] == "server"
    chroma = SERVICES[variables["CHROMA_HOST"]]
    assert chroma["spec"]["selector"] == WORKLOADS["chroma"]["spec"]["selector"]["matchLabels"]
