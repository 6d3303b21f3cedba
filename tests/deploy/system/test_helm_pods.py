"""Every pod of the chart, whichever component, is given the same things the same way: the release's ServiceAccount
with no API token, the labels, annotations and placement set for all pods (top-level values) or for its component
(the component's values, over those), the chart's own labels and annotations kept; and the gateway is reached from
outside as values.yaml and NOTES.txt say: a ClusterIP Service by default, an Ingress or an HTTPRoute on request.
`helm template` only: no cluster (test_helm_chart.py validates these objects against Kubernetes' schemas).
"""

from __future__ import annotations

import shutil

import pytest

from tests.deploy.system.test_helm_chart import (
    CHART,
    EXPOSED,
    FULLNAME,
    HELM,
    PLACED,
    VALUE_SETS,
    component,
    every_set,
    helm,
    pod_spec,
    rendered,
    set_json,
    template,
    validate,
    workloads,
)

# helm runs as a process: the system tier (not make test-unit).
pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not installed (the dev extra's helm-binary has it)")

# Each pod the chart makes, by the values that place it: its component's key (the helm test pod: tests, the
# upgrade's Job: models.prepare).
POD_VALUES = {"backend": "backend", "llm": "llm", "embedding": "embedding", "gateway": "gateway",
              "chroma": "vectorStore.chroma", "models-sync": "models.prepare", "test": "tests"}
SCHEDULING = ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints")


def every_pod(*settings: str) -> dict[str, dict]:
    """Every pod template by component, the upgrade's Job included (rendered as an upgrade), Chroma's too."""
    docs = template("--is-upgrade", "--set", "vectorStore.mode=server", *settings)
    pods = {component(doc): doc for doc in docs if doc["kind"] in ("Deployment", "StatefulSet", "Job", "Pod")}
    assert set(pods) == set(POD_VALUES)
    return pods


def pod_metadata(doc: dict) -> dict:
    return doc["metadata"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]


# --- the ServiceAccount -------------------------------------------------------------------------------------------


@every_set
def test_every_pod_runs_as_the_releases_service_account_without_a_token(values):
    docs = rendered(values)
    [account] = [doc for doc in docs if doc["kind"] == "ServiceAccount"]
    assert account["automountServiceAccountToken"] is False
    assert account["metadata"]["name"] == ("ov-genai" if values == "plain-manifests" else FULLNAME) + "-serviceaccount"
    pods = [*workloads(docs).values(), *[doc for doc in docs if doc["kind"] == "Pod"]]
    assert len(pods) >= 4
    for pod in pods:
        spec = pod_spec(pod)
        assert spec["serviceAccountName"] == account["metadata"]["name"], pod["metadata"]["name"]
        assert spec["automountServiceAccountToken"] is False, pod["metadata"]["name"]


@pytest.mark.parametrize(("settings", "name", "created"), [
    ([], f"{FULLNAME}-serviceaccount", True),
    (["--set", "serviceAccount.name=chat-pods"], "chat-pods", True),
    (["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=team-pods"], "team-pods", False),
    (["--set", "serviceAccount.create=false"], "default", False),  # the namespace's own
], ids=["default", "named", "existing", "namespace-default"])
def test_the_service_account_is_created_or_an_existing_one_is_used(settings, name, created):
    settings = [*settings, "--set-json", 'serviceAccount.annotations={"example.com/identity": "chat"}']
    pods = every_pod(*settings)
    accounts = objects_of(template(*settings), "ServiceAccount")
    assert set(accounts) == ({name} if created else set())
    for account in accounts.values():
        assert account["metadata"]["annotations"] == {"example.com/identity": "chat"}
    for where, pod in pods.items():
        assert pod_spec(pod)["serviceAccountName"] == name, where
        assert pod_spec(pod)["automountServiceAccountToken"] is False, where


def objects_of(docs: tuple[dict, ...], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


# --- labels, annotations and placement ---------------------------------------------------------------------------


def test_the_top_level_pod_values_reach_every_pod_and_a_components_own_win():
    """podLabels and podAnnotations merge (the component's key by key over the top-level ones); nodeSelector,
    tolerations, affinity and topologySpreadConstraints are the component's where it sets them, else the top-level
    ones. Here the gateway sets its own tier label, nodeSelector and tolerations."""
    gateway = PLACED["gateway"]
    for where, pod in every_pod(*set_json(PLACED)).items():
        validate(pod)  # the upgrade's Job too, which the value sets of test_helm_chart.py do not render
        own = gateway if where == "gateway" else {}
        metadata, spec = pod_metadata(pod), pod_spec(pod)
        assert {**PLACED["podLabels"], **own.get("podLabels", {})}.items() <= metadata["labels"].items(), where
        assert PLACED["podAnnotations"].items() <= metadata["annotations"].items(), where
        assert spec["nodeSelector"] == own.get("nodeSelector", PLACED["nodeSelector"]), where
        assert spec["tolerations"] == own.get("tolerations", PLACED["tolerations"]), where
        assert spec["affinity"] == PLACED["affinity"], where
        [spread] = spec["topologySpreadConstraints"]
        assert spread.items() >= PLACED["topologySpreadConstraints"][0].items(), where


@pytest.mark.parametrize("pod", sorted(POD_VALUES))
def test_each_components_values_place_its_own_pod_only(pod):
    own = {"podLabels": {"example.com/mine": pod}, "podAnnotations": {"example.com/note": pod},
           "nodeSelector": {"example.com/pool": pod}, "tolerations": [{"key": pod, "operator": "Exists"}],
           "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
               "weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
           "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
                                          "whenUnsatisfiable": "DoNotSchedule"}]}
    for where, doc in every_pod(*set_json({POD_VALUES[pod]: own})).items():
        metadata, spec = pod_metadata(doc), pod_spec(doc)
        if where == pod:
            assert metadata["labels"]["example.com/mine"] == pod and metadata["annotations"]["example.com/note"] == pod
            assert {key: spec[key] for key in SCHEDULING[:3]} == {key: own[key] for key in SCHEDULING[:3]}
            [spread] = spec["topologySpreadConstraints"]
            assert spread["maxSkew"] == 2 and spread["whenUnsatisfiable"] == "DoNotSchedule"
        else:
            assert "example.com/mine" not in metadata["labels"], where
            assert "example.com/note" not in metadata.get("annotations", {}), where
            assert not set(SCHEDULING[:3]) & set(spec), where


def test_the_charts_own_labels_and_annotations_win():
    """A pod label cannot take a pod out of its Service, PDB or network policies, nor an annotation stop an upgrade
    from rolling it."""
    pods = every_pod("--set-json", 'podLabels={"app.kubernetes.io/component": "other", "app.kubernetes.io/instance":'
                                   ' "other"}',
                     "--set-json", 'llm.podAnnotations={"checksum/models": "pinned"}')
    for where, doc in pods.items():
        labels = pod_metadata(doc)["labels"]
        assert labels["app.kubernetes.io/component"] == where and labels["app.kubernetes.io/instance"] == "chatqna"
        if doc["kind"] != "Pod" and doc["kind"] != "Job":
            assert doc["spec"]["selector"]["matchLabels"].items() <= labels.items(), where
    assert pod_metadata(pods["llm"])["annotations"]["checksum/models"] != "pinned"
    assert pod_metadata(pods["test"])["annotations"]["helm.sh/hook"] == "test"  # still helm test's hook pod


def test_a_spread_constraint_without_a_selector_spreads_the_components_own_pods():
    """The backend spreads its replicas across nodes unless told otherwise; a constraint given without a
    labelSelector counts each component's own pods, one with a selector is kept as given."""
    default = pod_spec(workloads("defaults")["backend"])["topologySpreadConstraints"]
    selector = workloads("defaults")["backend"]["spec"]["selector"]
    assert default == [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": selector}]
    assert all("topologySpreadConstraints" not in pod_spec(doc) for name, doc in workloads("defaults").items()
               if name != "backend")
    given = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"example.com/group": "genai"}}}
    pods = every_pod(*set_json({"topologySpreadConstraints": [PLACED["topologySpreadConstraints"][0], given]}))
    for where, doc in pods.items():
        zone, host = pod_spec(doc)["topologySpreadConstraints"]
        assert zone["labelSelector"]["matchLabels"].items() <= pod_metadata(doc)["labels"].items(), where
        assert zone["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == where
        assert host == given, where


# --- the gateway from outside ------------------------------------------------------------------------------------


def gateway_service(docs: tuple[dict, ...]) -> dict:
    return objects_of(docs, "Service")[f"{FULLNAME}-gateway"]


@pytest.mark.parametrize("values", ["defaults", "plain-manifests"])
def test_the_gateway_service_is_cluster_ip_by_default(values):
    """LoadBalancer stays Pending on kind and bare metal; port-forward, an Ingress or an HTTPRoute reach a ClusterIP."""
    [service] = [doc for doc in rendered(values) if doc["kind"] == "Service" and component(doc) == "gateway"]
    assert service["spec"]["type"] == "ClusterIP"
    assert not [doc for doc in rendered(values) if doc["kind"] in ("Ingress", "HTTPRoute")]  # off by default


@pytest.mark.parametrize("kind", ["LoadBalancer", "NodePort"])
def test_the_gateway_service_type_is_configurable(kind):
    assert gateway_service(template("--set", f"gateway.service.type={kind}"))["spec"]["type"] == kind


def routed_port(docs: tuple[dict, ...], name: str, port: int) -> None:
    """The Service `name` exists, is the gateway's, and serves `port`."""
    service = objects_of(docs, "Service")[name]
    assert component(service) == "gateway" and service["spec"]["selector"].items() <= pod_metadata(
        workloads(docs)["gateway"])["labels"].items()
    assert port in [entry["port"] for entry in service["spec"]["ports"]]


def test_the_ingress_sends_every_path_of_each_host_to_the_gateway():
    docs = rendered("placed-exposed")
    [ingress] = objects_of(docs, "Ingress").values()
    wanted = EXPOSED["ingress"]
    assert ingress["spec"]["ingressClassName"] == "nginx" and ingress["spec"]["tls"] == wanted["tls"]
    assert ingress["metadata"]["annotations"] == wanted["annotations"]
    assert [rule["host"] for rule in ingress["spec"]["rules"]] == wanted["hosts"]
    for rule in ingress["spec"]["rules"]:
        [path] = rule["http"]["paths"]
        assert path["path"] == "/" and path["pathType"] == "Prefix"
        routed_port(docs, path["backend"]["service"]["name"], path["backend"]["service"]["port"]["number"])
    # No host: one rule for any host; another Service port is followed.
    other = template("--set", "ingress.enabled=true", "--set", "gateway.service.port=80")
    [ingress] = objects_of(other, "Ingress").values()
    [rule] = ingress["spec"]["rules"]
    assert "host" not in rule and "ingressClassName" not in ingress["spec"] and "tls" not in ingress["spec"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend["port"] == {"number": 80}
    routed_port(other, backend["name"], 80)
    validate(ingress)


def test_the_http_route_attaches_to_the_given_gateway_and_sends_every_path_to_the_gateway():
    docs = rendered("placed-exposed")
    [route] = objects_of(docs, "HTTPRoute").values()
    wanted = EXPOSED["httpRoute"]
    assert route["spec"]["parentRefs"] == wanted["parentRefs"] and route["spec"]["hostnames"] == wanted["hostnames"]
    [rule] = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    [backend] = rule["backendRefs"]
    routed_port(docs, backend["name"], backend["port"])
    refused = helm("template", "t", str(CHART), "--set", "httpRoute.enabled=true")
    assert refused.returncode != 0 and "parentRefs" in refused.stderr  # a route attached to nothing


def notes(*settings: str, tmp_path) -> str:
    """NOTES.txt as `helm install` prints it: rendered by `helm template` from a copy of the chart that holds it as
    a file (`helm install --dry-run` needs a cluster)."""
    chart = tmp_path / CHART.name
    shutil.copytree(CHART, chart)
    (chart / "notes.txt").write_text((CHART / "templates/NOTES.txt").read_text())
    (chart / "templates/notes.yaml").write_text('notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n')
    [doc] = template("--show-only", "templates/notes.yaml", *settings, chart=chart)
    return doc["notes"]


def test_the_notes_say_how_to_reach_the_chat_page(tmp_path):
    forward = f"kubectl port-forward -n default service/{FULLNAME}-gateway 8888"
    text = notes(tmp_path=tmp_path / "defaults")
    assert forward in text and "http://localhost:8888/" in text and "inside the cluster only" in text
    text = notes(*set_json(EXPOSED), tmp_path=tmp_path / "exposed")
    assert "https://chat.example.com/" in text and "http://qna.example.com/" in text  # TLS for the first only
    assert "kubectl get gateway shared -n gateway-system" in text and forward in text
    text = notes("--set", "gateway.service.type=LoadBalancer", tmp_path=tmp_path / "balanced")
    assert "EXTERNAL-IP" in text and forward in text and "inside the cluster only" not in text


def test_the_placed_and_exposed_values_are_validated_with_every_value_set():
    """test_helm_chart.py validates every object of each value set against Kubernetes' schemas (the HTTPRoute against
    its CRD's) and checks its invariants: this set's Ingress, HTTPRoute and ServiceAccount are among them."""
    assert "placed-exposed" in VALUE_SETS
    assert {"Ingress", "HTTPRoute", "ServiceAccount"} <= {doc["kind"] for doc in rendered("placed-exposed")}
