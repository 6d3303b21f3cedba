"""The Helm chart (deploy/helm/ovgenai-stack) renders, with each kind of values an operator gives, objects that
Kubernetes accepts and that mean what the README says: the API key from the Secret in every service, probes,
Guaranteed resources with OpenVINO's threads matched to the CPU limit, the restricted security context, this
project's images at the chart's version, the backend's replicas each named in the LLM microservice's endpoints, an
HPA metric that the rendered prometheus-adapter rule exposes, the models named once. How it composes with other
releases and charts: test_helm_composition.py. `helm template` only: no cluster.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.support.servers import ROOT

CHART = ROOT / "deploy/helm/ovgenai-stack"
CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
HELM = shutil.which("helm", path=str(Path(sys.executable).parent)) or shutil.which("helm")
KUBERNETES_VERSION = "1.30.0"  # an old enough version that every supported cluster serves these APIs
# The images the Dockerfile's targets build (scripts/build_docker_*.sh), by repository.
PROJECT_IMAGES = {f"ov-genai-stack/{target}" for target in ("backend", "backend-gpu", "llm", "embedding", "gateway",
                                                           "models", "models-export")}
RELEASE = "chatqna"
FULLNAME = f"{RELEASE}-{CHART_META['name']}"  # every object's name starts with it
COMPONENTS = {"backend", "llm", "embedding", "gateway"}  # the project's servers



def set_json(values: dict) -> list[str]:
    """helm's arguments that set each top-level key of `values`."""
    return [arg for key, value in values.items() for arg in ("--set-json", f"{key}={json.dumps(value)}")]


# Every pod's metadata and placement at the top, the gateway's own over some of them (test_helm_pods.py).
PLACED = {
    "podLabels": {"example.com/team": "search", "example.com/tier": "app"},
    "podAnnotations": {"example.com/owner": "search"},
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "genai", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "example.com/pool", "operator": "In", "values": ["genai"]}]}]}}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway"}],
    "gateway": {"podLabels": {"example.com/tier": "edge"}, "nodeSelector": {"example.com/edge": "true"},
                "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoExecute"}]},
}
# The gateway reached from outside both ways.
EXPOSED = {
    "ingress": {"enabled": True, "className": "nginx", "hosts": ["chat.example.com", "qna.example.com"],
                "tls": [{"secretName": "chat-example-tls", "hosts": ["chat.example.com"]}],
                "annotations": {"nginx.ingress.kubernetes.io/proxy-buffering": "off"}},
    "httpRoute": {"enabled": True, "parentRefs": [{"name": "shared", "namespace": "gateway-system",
                                                   "sectionName": "https"}],
                  "hostnames": ["chat.example.com"]},
}

VALUE_SETS = {
    "defaults": [],
    "gpu": ["-f", str(CHART / "values-gpu.yaml")],
    "chroma-server": ["--set", "vectorStore.mode=server", "--set", "gateway.replicas=2"],
    "replicas-3": ["--set", "backend.replicas=3", "--set", "llm.replicas=2", "--set", "backend.resources.limits.cpu=4",
                   "--set", "backend.resources.requests.cpu=4"],
    "existing-secret": ["--set", "apiKey.existingSecret=team-key", "--set", "apiKey.key=token"],
    "autoscaled-monitored": ["--set", "autoscaling.enabled=true", "--set", "serviceMonitor.enabled=true",
                             "--set", "namespace.name=genai", "--set", "namespace.create=true"],
    "plain-manifests": ["-f", str(ROOT / "deploy/helm/plain-manifests.values.yaml")],
    "proxied": ["--set", "proxy.httpProxy=http://proxy.example.com:3128", "--set", "proxy.noProxy=mirror.internal",
                "--set", "vectorStore.mode=server", "--set-json",
                'networkPolicy.extraEgress=[{"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}], "ports": [{"protocol": '
                '"TCP", "port": 3128}]}]', "--set-json", 'allowedOrigins=["http://localhost:5173"]'],
    "placed-exposed": [*set_json({**PLACED, **EXPOSED}), "--set", "vectorStore.mode=server"],
}
# helm runs as a process: the system tier (not make test-unit).
pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not installed (the dev extra's helm-binary has it)")


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)


def template(*args: str, release: str = RELEASE, chart: Path = CHART) -> tuple[dict, ...]:
    result = helm("template", release, str(chart), *args)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


@cache
def rendered(name: str) -> tuple[dict, ...]:
    return template(*VALUE_SETS[name])


def objects(name: str, kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in rendered(name) if doc["kind"] == kind}


def component(doc: dict) -> str:
    return doc["metadata"]["labels"]["app.kubernetes.io/component"]


def workloads(name: str | tuple[dict, ...]) -> dict[str, dict]:
    """The Deployments and StatefulSets, by component (backend, llm, embedding, gateway, chroma)."""
    docs = rendered(name) if isinstance(name, str) else name
    return {component(doc): doc for doc in docs if doc["kind"] in ("Deployment", "StatefulSet")}


def pod_spec(doc: dict) -> dict:
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


def hook_pod(name: str | tuple[dict, ...]) -> dict:
    docs = rendered(name) if isinstance(name, str) else name
    [pod] = [doc for doc in docs if doc["kind"] == "Pod"]
    return pod


def containers(workload: dict, init: bool = True) -> list[dict]:
    spec = pod_spec(workload)
    return (spec.get("initContainers", []) if init else []) + spec["containers"]


def env(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


def server(name: str, workload: str) -> dict:
    return workloads(name)[workload]["spec"]["template"]["spec"]["containers"][0]


def named(values: str, suffix: str) -> str:
    """An object's name under these values: <fullname>-<suffix>."""
    return f"{'ov-genai' if values == 'plain-manifests' else FULLNAME}-{suffix}"


every_set = pytest.mark.parametrize("values", sorted(VALUE_SETS))


@pytest.mark.parametrize("extra", [[], ["-f", str(CHART / "values-gpu.yaml")]], ids=["defaults", "gpu"])
def test_helm_lint_passes(extra):
    result = helm("lint", "--strict", str(CHART), *extra)
    assert result.returncode == 0, result.stdout + result.stderr


# prometheus-operator's CRD is not among kubernetes-validate's schemas: the fields this chart uses, as the CRD
# (monitoring.coreos.com/v1, ServiceMonitor) declares them.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "matchExpressions": {"type": "array", "items": {
                        "type": "object", "required": ["key", "operator"], "additionalProperties": False,
                        "properties": {"key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists",
                                                                                         "DoesNotExist"]},
                                       "values": {"type": "array", "items": {"type": "string"}}}}}},
                    "additionalProperties": False},
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string", "pattern": "^/"},
                        "interval": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?"
                                                                  "(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                        "authorization": {
                            "type": "object", "additionalProperties": False,
                            "properties": {"type": {"type": "string"}, "credentials": {
                                "type": "object", "required": ["key"], "additionalProperties": False,
                                "properties": {"name": {"type": "string"}, "key": {"type": "string"},
                                               "optional": {"type": "boolean"}}}}},
                    }}},
            },
        },
    },
}


# Nor is the Gateway API's: the fields of an HTTPRoute this chart uses, as its CRD (gateway.networking.k8s.io/v1,
# standard channel) declares them, with its patterns and bounds.
DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
HTTP_ROUTE_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
HTTP_ROUTE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "gateway.networking.k8s.io/v1"},
        "kind": {"const": "HTTPRoute"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "parentRefs": {"type": "array", "maxItems": 32, "items": {
                    "type": "object", "required": ["name"], "additionalProperties": False,
                    "properties": {
                        "group": {"type": "string", "pattern": f"^$|{DNS_SUBDOMAIN}"},
                        "kind": {"type": "string", "pattern": "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"},
                        "namespace": {"type": "string", "pattern": DNS_LABEL, "maxLength": 63},
                        "name": {"type": "string", "minLength": 1, "maxLength": 253},
                        "sectionName": {"type": "string", "pattern": DNS_SUBDOMAIN, "maxLength": 253},
                        "port": HTTP_ROUTE_PORT}}},
                "hostnames": {"type": "array", "maxItems": 16, "items": {
                    "type": "string", "maxLength": 253, "pattern": "^(\\*\\.)?" + DNS_SUBDOMAIN.removeprefix("^")}},
                "rules": {"type": "array", "maxItems": 16, "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "matches": {"type": "array", "maxItems": 64, "items": {
                            "type": "object", "additionalProperties": False,
                            "properties": {"path": {
                                "type": "object", "additionalProperties": False,
                                "properties": {"type": {"enum": ["Exact", "PathPrefix", "RegularExpression"]},
                                               "value": {"type": "string", "maxLength": 1024, "pattern": "^/"}}}}}},
                        # A Service must be given its port (the CRD's own validation rule).
                        "backendRefs": {"type": "array", "maxItems": 16, "items": {
                            "type": "object", "required": ["name", "port"], "additionalProperties": False,
                            "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                                           "name": {"type": "string", "minLength": 1, "maxLength": 253},
                                           "namespace": {"type": "string", "pattern": DNS_LABEL},
                                           "port": HTTP_ROUTE_PORT,
                                           "weight": {"type": "integer", "minimum": 0, "maximum": 1000000}}}},
                    }}},
            },
        },
    },
}
CRD_SCHEMAS = {"monitoring.coreos.com/v1": SERVICE_MONITOR_SCHEMA, "gateway.networking.k8s.io/v1": HTTP_ROUTE_SCHEMA}


def validate(doc: dict) -> None:
    """Kubernetes' own schemas (strict: no unknown field), or the CRD's for the two kinds they lack."""
    import kubernetes_validate  # a dev tool: the unit tier collects this module without it

    if doc["apiVersion"] in CRD_SCHEMAS:
        jsonschema.validate(doc, CRD_SCHEMAS[doc["apiVersion"]])
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@every_set
def test_every_object_is_valid_kubernetes(values):
    for doc in rendered(values):
        validate(doc)


def secret_name(values: str) -> tuple[str, str]:
    return {"existing-secret": ("team-key", "token"), "plain-manifests": ("ov-genai-api-key", "api-key")}.get(
        values, (named(values, "api-key"), "api-key"))


@every_set
def test_every_service_takes_the_api_key_from_the_secret(values):
    name, key = secret_name(values)
    created = objects(values, "Secret")
    if values in ("existing-secret", "plain-manifests"):
        assert not created  # the operator's own Secret: the chart neither makes nor overwrites it
    else:
        assert set(created) == {name} and len(created[name]["data"][key]) >= 48
    project = {w: d for w, d in workloads(values).items() if w != "chroma"}  # Chroma takes no key
    assert set(project) == COMPONENTS
    if values != "plain-manifests":  # `helm test`'s pod sends it
        assert env(containers(hook_pod(values))[0])["API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": name,
                                                                                               "key": key}
    for workload in project.values():
        for container in containers(workload, init=False):
            reference = env(container)["SERVICE_API_KEY"]["valueFrom"]["secretKeyRef"]
            assert reference == {"name": name, "key": key}, workload["metadata"]["name"]
            for variable, item in env(container).items():  # every key it sends downstream too
                if variable.endswith("_API_KEY"):
                    assert item["valueFrom"]["secretKeyRef"] == {"name": name, "key": key}, variable


@every_set
def test_every_server_has_readiness_and_liveness_probes(values):
    for name, workload in workloads(values).items():
        for container in containers(workload, init=False):
            assert container["readinessProbe"]["httpGet"] and container["livenessProbe"]["httpGet"], name


@every_set
def test_every_pod_is_guaranteed_its_cpu_and_memory(values):
    """requests == limits for CPU and memory in every container, init containers included: the Guaranteed QoS
    class, which the kubelet's static CPU manager gives cores of their own."""
    for name, workload in workloads(values).items():
        for container in containers(workload):
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["limits"]), (name, container["name"])
            assert resources["requests"] == resources["limits"], (name, container["name"])


def whole_cpus(quantity: str) -> int:
    return max(1, int(quantity[:-1]) // 1000) if quantity.endswith("m") else max(1, int(float(quantity)))


@every_set
def test_openvino_threads_match_the_cpu_limit(values):
    """Without it OpenVINO sizes its thread pool to every core of the node, far more than the pod's CPU limit."""
    for workload, variable in (("backend", "PLUGIN_CONFIG"), ("embedding", "EMBEDDING_PLUGIN_CONFIG")):
        container = server(values, workload)
        config = json.loads(env(container)[variable]["value"])
        device = env(container).get("VLLM_OPENVINO_DEVICE", {"value": "CPU"})["value"]
        if device.startswith("CPU"):
            assert config["INFERENCE_NUM_THREADS"] == whole_cpus(str(container["resources"]["limits"]["cpu"]))
        else:  # a CPU property, which the GPU plugin would refuse
            assert "INFERENCE_NUM_THREADS" not in config


@pytest.mark.parametrize(("cpu", "threads"), [("3", 3), ("1500m", 1), ("250m", 1), ("2.5", 2)])
def test_threads_follow_any_cpu_quantity(cpu, threads):
    for settings in (["--set-string", f"backend.resources.limits.cpu={cpu}"],  # the limit, else the request
                     ["--set", "backend.resources.limits=null",
                      "--set-string", f"backend.resources.requests.cpu={cpu}"]):
        docs = template(*settings, "--show-only", "templates/backend.yaml")
        backend = next(doc for doc in docs if doc["kind"] == "StatefulSet")
        assert json.loads(env(backend["spec"]["template"]["spec"]["containers"][0])["PLUGIN_CONFIG"]["value"]) == {
            "INFERENCE_NUM_THREADS": threads}


@every_set
def test_every_pod_runs_under_the_restricted_security_standard(values):
    pods = {**workloads(values), **({"test": hook_pod(values)} if values != "plain-manifests" else {})}
    for name, workload in pods.items():
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["enableServiceLinks"] is False, name
        for container in containers(workload):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
            assert context["readOnlyRootFilesystem"] is True, (name, container["name"])


def test_the_app_version_is_the_projects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert CHART_META["appVersion"] == project and CHART_META["version"]


@every_set
def test_images_are_this_projects_at_the_charts_version(values):
    """<image.registry>/ov-genai-stack/<Dockerfile target>:<appVersion>, as the build scripts name them; Chroma's
    from its own registry and pinned version; never OPEA's names unless values ask for them."""
    pods = [*workloads(values).values(), *([hook_pod(values)] if values != "plain-manifests" else [])]
    for workload in pods:
        for container in containers(workload):
            image = container["image"]
            assert container["imagePullPolicy"] == "IfNotPresent", image
            assert "opea/" not in image and ":" in image.rsplit("/", 1)[-1], image
            repository, tag = image.rsplit(":", 1)
            assert tag != "latest", image
            if container["name"] == "chroma":
                assert image == "docker.io/chromadb/chroma:1.5.9"
                continue
            registry, project_image = repository.split("/", 1)
            assert registry == VALUES["image"]["registry"] and project_image in PROJECT_IMAGES, image
            assert tag == CHART_META["appVersion"], image
            if container["name"] == "backend":
                assert project_image == ("ov-genai-stack/backend-gpu" if values == "gpu" else "ov-genai-stack/backend")


def test_models_are_prepared_without_torch_unless_the_conversion_tools_are_asked_for():
    """Every pod that prepares models (the backend's, the embedding service's, the upgrade's Job) runs the models
    image, which has no torch; models.prepare.exportTools picks the models-export image, for a checkpoint."""
    def preparing(docs: tuple[dict, ...]) -> dict[str, str]:
        return {doc["metadata"]["name"]: container["image"] for doc in docs
                if doc["kind"] in ("Deployment", "StatefulSet", "Job")
                for container in pod_spec(doc).get("initContainers", []) + pod_spec(doc)["containers"]
                if container["name"] == "prepare-models"}

    for extra, image in (([], "models"), (["--set", "models.prepare.exportTools=true"], "models-export")):
        pods = preparing(template("--is-upgrade", *extra))
        assert set(pods) == {named("defaults", suffix) for suffix in ("backend", "embedding", "models-sync")}
        assert set(pods.values()) == {f"localhost/ov-genai-stack/{image}:{CHART_META['appVersion']}"}


def test_the_models_are_named_once_in_values():
    chart_text = {path.relative_to(CHART): path.read_text() for path in CHART.rglob("*") if path.is_file()}
    for model in (VALUES["models"]["llm"]["id"], VALUES["models"]["embedding"]["id"]):
        where = {str(path): text.count(model) for path, text in chart_text.items() if model in text}
        assert where == {"values.yaml": 1}, model
    # ... and every pod reads them from the ConfigMap rendered from there.
    config = objects("defaults", "ConfigMap")[named("defaults", "models")]["data"]
    assert config["LLM_MODEL_ID"] == VALUES["models"]["llm"]["id"]
    assert config["EMBEDDING_MODEL_ID"] == VALUES["models"]["embedding"]["id"]
    assert env(server("defaults", "llm"))["LLM_MODEL"]["valueFrom"]["configMapKeyRef"]["key"] == "LLM_MODEL_ID"


@pytest.mark.parametrize(("values", "count"), [("defaults", 1), ("replicas-3", 3), ("plain-manifests", 4),
                                               ("autoscaled-monitored", 4)])
def test_the_llm_microservice_routes_across_every_backend_replica(values, count):
    """Each replica of the StatefulSet has a stable name under the headless Service; the LLM microservice is given
    all of them (with the HPA, every replica it may start: one not running is skipped) and routes by prefix."""
    backend = workloads(values)["backend"]
    service = objects(values, "Service")[backend["spec"]["serviceName"]]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= backend["spec"]["template"]["metadata"]["labels"].items()
    autoscaled = objects(values, "HorizontalPodAutoscaler")
    if autoscaled:
        assert "replicas" not in backend["spec"]  # the HPA owns it; an upgrade must not reset it
        assert autoscaled[backend["metadata"]["name"]]["spec"]["maxReplicas"] == count
    else:
        assert backend["spec"]["replicas"] == count
    variables = {key: item.get("value") for key, item in env(server(values, "llm")).items()}
    port = backend["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert variables["LLM_ENDPOINT"].split(",") == [
        f"http://{backend['metadata']['name']}-{i}.{service['metadata']['name']}:{port}" for i in range(count)]
    assert variables["LLM_ROUTING"] == "prefix"


def adapter_rules(values: str) -> list[dict]:
    config = objects(values, "ConfigMap")[named(values, "prometheus-adapter-rules")]
    return yaml.safe_load(config["data"]["values.yaml"])["rules"]["custom"]


@pytest.mark.parametrize("values", ["autoscaled-monitored", "plain-manifests"])
def test_the_hpas_metric_is_the_one_the_adapter_rule_exposes(values):
    exposed = {}
    for rule in adapter_rules(values):
        series = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", rule["seriesQuery"]).group(0)
        assert re.fullmatch(rule["name"]["matches"], series)
        exposed[re.sub(rule["name"]["matches"], rule["name"]["as"], series)] = series
        assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}  # a Pods metric: per pod
    [hpa] = objects(values, "HorizontalPodAutoscaler").values()
    [metric] = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] in exposed
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                             "name": workloads(values)["backend"]["metadata"]["name"]}
    # ... and the series is one the backend exports on /metrics.
    metrics = (ROOT / "dependency/ovgenai_server/metrics.py").read_text()
    series = exposed[metric["pods"]["metric"]["name"]]
    prefix = re.search(r'PREFIX = "([^"]+)"', metrics).group(1)
    assert series.startswith(prefix) and f'f"{{PREFIX}}{series.removeprefix(prefix)}"' in metrics


def test_no_hpa_or_adapter_rule_unless_autoscaling():
    assert not objects("defaults", "HorizontalPodAutoscaler")
    assert named("defaults", "prometheus-adapter-rules") not in objects("defaults", "ConfigMap")


@every_set
def test_every_workload_has_a_disruption_budget(values):
    budgets = {component(doc): doc for doc in rendered(values) if doc["kind"] == "PodDisruptionBudget"}
    for name, workload in workloads(values).items():
        selector = budgets[name]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
        assert budgets[name]["spec"]["maxUnavailable"] >= 1  # a single replica still lets a node drain


def test_the_gpu_values_put_the_backend_on_an_intel_gpu():
    backend = server("gpu", "backend")
    variables = {key: item.get("value") for key, item in env(backend).items()}
    assert variables["VLLM_OPENVINO_DEVICE"] == "GPU"  # what the backend reads (settings.device)
    assert variables["VLLM_OPENVINO_KV_CACHE_PRECISION"] == "f16"  # as compose.gpu.yaml
    assert backend["resources"]["limits"]["gpu.intel.com/i915"] == "1"
    assert backend["resources"]["requests"]["gpu.intel.com/i915"] == "1"
    assert backend["image"] == "localhost/ov-genai-stack/backend-gpu:" + CHART_META["appVersion"]
    pod = workloads("gpu")["backend"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["supplementalGroups"]  # the render node's group
    assert "gpu.intel.com/i915" not in server("defaults", "backend")["resources"]["limits"]


@pytest.mark.parametrize(("values", "store"), [("defaults", "embedded"), ("chroma-server", "server")])
def test_the_vector_store_mode(values, store):
    gateway = workloads(values)["gateway"]
    variables = {key: item.get("value") for key, item in env(gateway["spec"]["template"]["spec"]["containers"][0])
                 .items()}
    assert variables["VECTOR_STORE"] == store
    if store == "server":
        assert "chroma" in workloads(values) and variables["CHROMA_HOST"] in objects(values, "Service")
        assert variables["DATA_DIR"].startswith("/tmp/")
    else:  # one gateway, its store on its own volume
        assert "chroma" not in workloads(values) and gateway["spec"]["replicas"] == 1
        assert gateway["spec"]["strategy"] == {"type": "Recreate"}
        volumes = {v["name"]: v for v in gateway["spec"]["template"]["spec"]["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in gateway["spec"]["template"]["spec"]["containers"][0]
                  ["volumeMounts"]}
        claim = volumes[mounts["/data"]]["persistentVolumeClaim"]["claimName"]
        assert claim in objects(values, "PersistentVolumeClaim") and variables["DATA_DIR"].startswith("/data/")


def backend_cache(*settings: str) -> tuple[dict, list[dict]]:
    """The backend's cache volume, and its claim templates, as the chart renders them with `settings`."""
    docs = template(*(arg for setting in settings for arg in ("--set", setting)))
    backend = workloads(docs)["backend"]
    pod = backend["spec"]["template"]["spec"]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == "/home/serving/.cache"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    templates = backend["spec"].get("volumeClaimTemplates", [])
    claimed = {template["metadata"]["name"]: template for template in templates}
    assert (mount["name"] in volumes) != (mount["name"] in claimed)  # one source, never both
    return volumes.get(mount["name"]) or claimed[mount["name"]], templates


def test_each_backend_replica_keeps_its_engine_cache_across_restarts():
    """Autotune's measurement (cached per model and CPU) and weights compressed at load survive a restart or an
    upgrade: a claim per replica, not an emptyDir that a new pod finds empty and measures again."""
    cache, templates = backend_cache()
    assert cache["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert cache["spec"]["resources"]["requests"]["storage"] == VALUES["backend"]["cacheVolume"]["size"]
    assert "storageClassName" not in cache["spec"]  # the cluster's default
    cache, _ = backend_cache("backend.cacheVolume.size=5Gi", "backend.cacheVolume.storageClassName=fast")
    assert cache["spec"]["storageClassName"] == "fast" and cache["spec"]["resources"]["requests"]["storage"] == "5Gi"
    cache, templates = backend_cache("backend.cacheVolume.size=")
    assert cache == {"name": "cache", "emptyDir": {}} and templates == []


def test_an_embedded_store_refuses_several_gateways():
    result = helm("template", "t", str(CHART), "--set", "gateway.replicas=2")
    assert result.returncode != 0 and "vectorStore.mode=server" in result.stderr


def test_the_service_monitor_scrapes_every_service_with_the_key():
    [monitor] = objects("autoscaled-monitored", "ServiceMonitor").values()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": f"{FULLNAME}-api-key",
                                                                           "key": "api-key"}}
    selector = monitor["spec"]["selector"]
    [expression] = selector["matchExpressions"]
    services = {component(service): service for service in objects("autoscaled-monitored", "Service").values()}
    scraped = {name for name, service in services.items()
               if selector["matchLabels"].items() <= service["metadata"]["labels"].items()
               and service["metadata"]["labels"]["app.kubernetes.io/component"] in expression["values"]}
    assert scraped == COMPONENTS
    for service in scraped:  # the port it names exists on each
        assert endpoint["port"] in [port["name"] for port in services[service]["spec"]["ports"]]
    assert not objects("defaults", "ServiceMonitor")  # the CRD may be absent: only when asked for


def test_a_pinned_namespace_holds_every_object():
    docs = rendered("autoscaled-monitored")
    [namespace] = [doc for doc in docs if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for doc in docs:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "genai", (doc["kind"], doc["metadata"]["name"])
    # Unpinned, objects carry none: helm install -n, or kubectl apply -n, puts them where it is told.
    assert all("namespace" not in doc["metadata"] for doc in rendered("defaults"))


def test_the_defaults_are_small():
    """What the defaults ask of a cluster: every pod's larger of its init container and its containers."""
    def cpu(quantity: str) -> float:
        return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)

    def gib(quantity: str) -> float:
        return int(quantity[:-2]) / (1024 if quantity.endswith("Mi") else 1)

    total_cpu = total_memory = 0.0
    for workload in workloads("defaults").values():
        spec = workload["spec"]["template"]["spec"]
        pods = workload["spec"].get("replicas", 1)
        requests = [c["resources"]["requests"] for c in spec.get("initContainers", [])]
        running = [c["resources"]["requests"] for c in spec["containers"]]
        total_cpu += pods * max([cpu(r["cpu"]) for r in requests] + [sum(cpu(r["cpu"]) for r in running)])
        total_memory += pods * max([gib(r["memory"]) for r in requests] + [sum(gib(r["memory"]) for r in running)])
    assert total_cpu <= 4 and total_memory <= 8


def test_the_plain_manifests_are_the_charts_rendering():
    """deploy/kubernetes is generated (make k8s-manifests): a chart change must come with them."""
    result = subprocess.run([sys.executable, str(ROOT / "scripts/k8s_manifests.py"), "--check"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("setting", ["backend.replica=2", "vectorStore.mode=Server", "backend.image.tag=latest",
                                     "backend.resources.cpu=2", "backend.resources.limits.cpus=2",
                                     "backend.cacheVolume.size=lots", "nameOverride=Not_A_Name",
                                     "ingress.host=chat.example.com", "ingress.hosts[0]=Chat.Example.Com",
                                     "httpRoute.parentRefs[0].nam=shared", "serviceAccount.create=maybe",
                                     "gateway.service.type=Ingress", "podLabels.replicas=3",
                                     "tolerations[0].efect=NoSchedule", "llm.nodeSelectors.a=b",
                                     "vectorStore.chroma.affinity.nodeAfinity.a=b"])
def test_a_misspelt_or_unsupported_value_is_refused(setting):
    """values.schema.json: a typo fails the install instead of silently leaving the default in place."""
    result = helm("template", "t", str(CHART), "--set", setting)
    assert result.returncode != 0 and "schema" in result.stderr
