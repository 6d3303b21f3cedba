"""The Kubernetes manifests mean what the README says: models prepared into the volume by an init container,
services that keep Chroma's settings clean, an API key from a Secret on every service, and readiness that keeps
the gateway's endpoints through a backend restart."""

from __future__ import annotations

import pytest
import yaml

from tests.support.servers import ROOT

MANIFESTS = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))
WORKLOADS = {doc["metadata"]["name"]: doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text())
             if doc and doc["kind"] in ("Deployment", "StatefulSet")}


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
    assert init["image"].startswith("opea/models:") and "command" not in init  # the image's `prepare` entrypoint
    assert {"LLM_MODEL_ID", "EMBEDDING_MODEL_ID", "HF_TOKEN"} <= set(env(init))
    assert env(init)["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    [init_mount] = init["volumeMounts"]
    assert init_mount["mountPath"] == "/models" and not init_mount.get("readOnly")
    [server_mount] = spec["containers"][0]["volumeMounts"]
    assert server_mount["mountPath"] == "/models" and server_mount["readOnly"] is True
    [volume] = spec["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "models"


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
    for text in [path.read_text() for path in MANIFESTS] + [(ROOT / "README.md").read_text()]:
        assert "kubectl cp" not in text
