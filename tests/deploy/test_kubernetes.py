"""The Kubernetes manifests (rendered from the Helm chart: tests/deploy/system/test_helm_chart.py checks that they are
its rendering, and the chart's invariants under other values) mean what docs/deployment.md says: models prepared into
the volume by an init container, services that keep Chroma's settings clean, an API key from a Secret on every service,
readiness that keeps the gateway's endpoints through a backend restart, the "restricted" security context on every
container, and a default-deny network policy with the stack's few paths."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import yaml

from ovgenai_common.security import PROBE_PATHS
from tests.support.servers import ROOT

MANIFESTS = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))
DOCUMENTS = [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]
# Workloads by component (backend, llm, embedding, gateway, chroma): their names derive from the release's
# (ov-genai-<component> here: plain-manifests.values.yaml's fullnameOverride).
WORKLOADS = {doc["metadata"]["labels"]["app.kubernetes.io/component"]: doc for doc in DOCUMENTS
             if doc["kind"] in ("Deployment", "StatefulSet")}
BY_NAME = {doc["metadata"]["name"]: doc for doc in WORKLOADS.values()}
SERVICES = {doc["metadata"]["name"]: doc for doc in DOCUMENTS if doc["kind"] == "Service"}
CONFIG_MAPS = {doc["metadata"]["name"]: doc for doc in DOCUMENTS if doc["kind"] == "ConfigMap"}
PREPARE = ["python", "-m", "ovgenai_models", "prepare", "--model_repository_path", "/models", "--serve_only"]
MODELS_CONFIG = "ov-genai-models"  # the ConfigMap every pod reads its models from (and the models volume's claim)
LLM_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
APP_VERSION = yaml.safe_load((ROOT / "deploy/helm/ovgenai-stack/Chart.yaml").read_text())["appVersion"]


def pod(name: str) -> dict:
    return WORKLOADS[name]["spec"]["template"]["spec"]


def env(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_no_service_variables_are_injected(name):
    """A Service named chroma would inject CHROMA_PORT=tcp://..., which Chroma and the gateway read as settings."""
    assert pod(name)["enableServiceLinks"] is False


@pytest.mark.parametrize("name", ["backend", "embedding"])
def test_models_are_prepared_into_the_volume_by_an_init_container(name):
    spec = pod(name)
    [init] = spec["initContainers"]
    assert init["image"] == f"localhost/ov-genai-stack/models:{APP_VERSION}" and init["command"] == PREPARE
    variables = env(init)
    assert init["envFrom"] == [{"configMapRef": {"name": MODELS_CONFIG}}]  # LLM_MODEL_ID, ... from one place
    assert variables["HF_HOME"]["value"] == "/models/.hf-cache"  # the download cache persists with the models
    assert variables["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True  # only gated models need it
    [init_mount] = [mount for mount in init["volumeMounts"] if mount["name"] == "models"]
    assert init_mount["mountPath"] == "/models" and not init_mount.get("readOnly")
    [server_mount] = [mount for mount in spec["containers"][0]["volumeMounts"] if mount["name"] == "models"]
    assert server_mount["mountPath"] == "/models" and server_mount["readOnly"] is True
    [claimed] = [volume for volume in spec["volumes"] if "persistentVolumeClaim" in volume]
    assert claimed["name"] == "models" and claimed["persistentVolumeClaim"]["claimName"] == MODELS_CONFIG


def from_config_map(variable: dict) -> str:
    """The ConfigMap key a variable takes its value from (every model name comes from the models ConfigMap)."""
    reference = variable["valueFrom"]["configMapKeyRef"]
    assert reference["name"] == MODELS_CONFIG
    return reference["key"]


def test_the_models_are_named_in_one_config_map():
    models = CONFIG_MAPS[MODELS_CONFIG]["data"]
    assert models["LLM_MODEL_ID"] == LLM_MODEL_ID and models["EMBEDDING_MODEL_ID"] == EMBEDDING_MODEL_ID
    assert models["RERANK_MODEL_ID"] == ""  # no reranker unless one is named
    assert {"LLM_MODEL_REVISION", "GGUF_FILENAME", "EMBEDDING_MODEL_REVISION", "RERANK_MODEL_REVISION",
            "HF_ENDPOINT"} <= set(models)


def test_the_prepared_models_are_the_served_ones():
    """Each service takes its model name from the ConfigMap the init containers prepare from, never a copy."""
    assert from_config_map(env(pod("llm")["containers"][0])["LLM_MODEL"]) == "LLM_MODEL_ID"
    gateway = env(pod("gateway")["containers"][0])
    assert from_config_map(gateway["LLM_MODEL_ID"]) == "LLM_MODEL_ID"  # the model it asks the LLM microservice for
    assert from_config_map(gateway["EMBEDDING_MODEL_ID"]) == "EMBEDDING_MODEL_ID"
    assert from_config_map(gateway["RERANK_MODEL_ID"]) == "RERANK_MODEL_ID"  # set: it reranks
    embedding = pod("embedding")["containers"][0]
    names = [item["name"] for item in embedding["env"]]
    variables = env(embedding)
    assert from_config_map(variables["EMBEDDING_MODEL_ID"]) == "EMBEDDING_MODEL_ID"
    # Kubernetes expands $(NAME) only from variables defined before it.
    assert variables["EMBEDDING_MODEL_PATH"]["value"] == "/models/$(EMBEDDING_MODEL_ID)"
    assert names.index("EMBEDDING_MODEL_ID") < names.index("EMBEDDING_MODEL_PATH")
    assert from_config_map(variables["RERANK_MODEL_ID"]) == "RERANK_MODEL_ID"
    assert variables["MODEL_REPOSITORY_PATH"]["value"] == "/models"
    backend = env(pod("backend")["containers"][0])
    # The repository, whose config.json `prepare --serve_only` lists the LLM in, under its id: what the LLM
    # microservice asks for. The pod reads no model name, so a changed one is swapped in, not rolled out.
    assert backend["MODEL_PATH"]["value"] == "/models" and "LLM_MODEL_ID" not in backend
    assert "--serve_only" in pod("backend")["initContainers"][0]["command"]


@pytest.mark.parametrize(("name", "variables"), [
    ("backend", ["SERVICE_API_KEY"]),
    ("llm", ["SERVICE_API_KEY", "OPENAI_API_KEY"]),
    ("embedding", ["SERVICE_API_KEY"]),
    ("gateway", ["SERVICE_API_KEY", "EMBEDDING_API_KEY", "LLM_API_KEY", "RERANK_API_KEY"]),
])
def test_every_service_takes_its_api_key_from_the_secret(name, variables):
    container = env(pod(name)["containers"][0])
    for variable in variables:
        reference = container[variable]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": "ov-genai-api-key", "key": "api-key"}  # required: no pod runs without it


@pytest.mark.parametrize("name", ["gateway", "llm"])
def test_readiness_does_not_follow_the_backend(name):
    container = pod(name)["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/live"


def test_no_manual_copying_into_the_volume_is_documented():
    guide = (ROOT / "docs/deployment.md").read_text()
    for text in [path.read_text() for path in MANIFESTS] + [guide]:
        assert "kubectl cp" not in text
    assert "kubectl create secret generic ov-genai-api-key" in guide  # the Secret every service requires


@pytest.mark.parametrize("name", ["backend", "llm", "embedding", "gateway"])
def test_probes_need_no_api_key(name):
    """Every service requires the API key on every route but the probes; the kubelet sends none."""
    container = pod(name)["containers"][0]
    paths = {container[probe]["httpGet"]["path"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")
             if probe in container}
    assert paths and paths <= PROBE_PATHS


def test_the_scraped_metrics_say_that_prometheus_must_send_the_key():
    """/metrics needs the key: docs/security.md shows the scrape job with it, and the manifest points there."""
    annotations = WORKLOADS["backend"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics"
    assert "authorization" in (ROOT / "deploy/kubernetes/backend.yaml").read_text().split("annotations:")[0]
    assert "credentials_file" in (ROOT / "docs/security.md").read_text()


def containers(name: str) -> list[dict]:
    return pod(name).get("initContainers", []) + pod(name)["containers"]


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_pod_runs_under_the_restricted_security_standard(name):
    """Kubernetes' "restricted" Pod Security Standard, and a read-only root file system on top."""
    spec = pod(name)
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in containers(name):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["capabilities"] == {"drop": ["ALL"]}, container["name"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert not context.get("privileged") and context.get("runAsUser", 1000) != 0


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_pod_runs_as_the_stacks_service_account_without_a_token(name):
    """No pod calls the Kubernetes API: none runs as the namespace's shared "default" account, none gets a token."""
    [account] = [doc for doc in DOCUMENTS if doc["kind"] == "ServiceAccount"]
    assert account["automountServiceAccountToken"] is False
    assert pod(name)["serviceAccountName"] == account["metadata"]["name"] == "ov-genai-serviceaccount"
    assert pod(name)["automountServiceAccountToken"] is False


def test_the_gateway_is_reached_through_port_forward_or_an_ingress_of_yours():
    """A ClusterIP Service: a LoadBalancer would stay Pending on kind and bare metal."""
    assert SERVICES["ov-genai-gateway"]["spec"]["type"] == "ClusterIP"
    assert "kubectl port-forward service/ov-genai-gateway 8888" in (ROOT / "docs/deployment.md").read_text()


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_container_can_write_its_temporary_files(name):
    """With a read-only root file system, /tmp (the engine's IPC sockets, export scratch space, the gateway's
    spooled uploads) must be a volume, and an emptyDir (nothing left behind)."""
    volumes = {volume["name"]: volume for volume in pod(name).get("volumes", [])}
    for container in containers(name):
        mounts = {mount["mountPath"]: mount["name"] for mount in container.get("volumeMounts", [])}
        assert "/tmp" in mounts, container["name"]
        assert "emptyDir" in volumes[mounts["/tmp"]], container["name"]
    gateway = {item["name"]: item.get("value") for item in pod("gateway")["containers"][0]["env"]}
    assert gateway["DATA_DIR"].startswith("/tmp/")


POLICIES = {doc["metadata"]["name"].removeprefix("ov-genai-"): doc for doc in DOCUMENTS
            if doc["kind"] == "NetworkPolicy"}


def pods_selected(policy: dict) -> set[str]:
    wanted = policy["spec"]["podSelector"].get("matchLabels", {})
    return {name for name, workload in WORKLOADS.items()
            if wanted.items() <= workload["spec"]["template"]["metadata"]["labels"].items()}


def test_a_default_deny_policy_covers_every_pod():
    deny = POLICIES["default-deny"]["spec"]
    assert set(deny["policyTypes"]) == {"Ingress", "Egress"} and "ingress" not in deny and "egress" not in deny
    assert pods_selected(POLICIES["default-deny"]) == set(WORKLOADS)


def allowed_ingress() -> set[tuple[str, str, int]]:
    """(from, to, port) for every pod-to-pod path the policies open ('*' for anyone)."""
    paths = set()
    for policy in POLICIES.values():
        for target in pods_selected(policy):
            for rule in policy["spec"].get("ingress", []):
                sources = ["*"] if "from" not in rule else [
                    name for peer in rule["from"] if "podSelector" in peer and "namespaceSelector" not in peer
                    for name in pods_selected({"spec": {"podSelector": peer["podSelector"]}})]
                for source in sources:
                    for port in rule["ports"]:
                        paths.add((source, target, port["port"]))
    return paths


def test_the_policies_open_only_the_stacks_own_paths():
    assert allowed_ingress() == {
        ("*", "gateway", 8888),
        ("gateway", "llm", 9000),
        ("gateway", "embedding", 6000),
        ("gateway", "chroma", 8000),
        ("llm", "backend", 8008),
    }
    for name, workload in WORKLOADS.items():  # every port a pod serves is one of them
        for container in workload["spec"]["template"]["spec"]["containers"]:
            for port in container.get("ports", []):
                assert any(target == name and p == port["containerPort"] for _, target, p in allowed_ingress())


def test_chroma_has_no_way_out_and_is_reached_only_by_the_gateway():
    chroma = POLICIES["chroma"]["spec"]
    assert chroma["egress"] == [] and "Egress" in chroma["policyTypes"]
    assert {source for source, target, _ in allowed_ingress() if target == "chroma"} == {"gateway"}


def _addresses() -> list[tuple[str, str, str, int]]:
    """(workload, variable, host, port) of every downstream address a container is given."""
    found = []
    for name in WORKLOADS:
        for container in pod(name)["containers"]:
            variables = {key: item.get("value") for key, item in env(container).items()}
            for key, value in variables.items():
                if isinstance(value, str) and value.startswith(("http://", "https://")):
                    for address in value.split(","):  # several: the replicas a request is routed among
                        url = urlsplit(address)
                        found.append((name, key, url.hostname, url.port))
            if "CHROMA_HOST" in variables:
                found.append((name, "CHROMA_HOST", variables["CHROMA_HOST"], int(variables["CHROMA_PORT"])))
    return found


@pytest.mark.parametrize(("name", "variable", "host", "port"), _addresses(), ids=lambda value: str(value))
def test_downstream_addresses_name_a_service_and_its_port(name, variable, host, port):
    """A Service, or one replica of a StatefulSet under its headless Service (`<set>-<ordinal>.<service>`)."""
    if "." in host:
        pod, service = host.split(".")
        workload, ordinal = pod.rsplit("-", 1)
        assert BY_NAME[workload]["spec"]["serviceName"] == service, f"{name}: {variable} names no replica"
        assert SERVICES[service]["spec"]["clusterIP"] == "None"  # a DNS name per pod: headless
        assert int(ordinal) < max([BY_NAME[workload]["spec"].get("replicas", 0)] + [
            doc["spec"]["maxReplicas"] for doc in DOCUMENTS if doc["kind"] == "HorizontalPodAutoscaler"
            and doc["spec"]["scaleTargetRef"]["name"] == workload])
        host = service
    assert host in SERVICES, f"{name}: {variable} names no Service"
    assert port in [entry["port"] for entry in SERVICES[host]["spec"]["ports"]]


def test_the_gateway_uses_the_chroma_server():
    variables = {key: item.get("value") for key, item in env(pod("gateway")["containers"][0]).items()}
    assert variables["VECTOR_STORE"] == "server"
    chroma = SERVICES[variables["CHROMA_HOST"]]
    assert chroma["spec"]["selector"] == WORKLOADS["chroma"]["spec"]["selector"]["matchLabels"]
