"""The Helm chart composes as charts do: names derived from the release (two releases in a namespace, or the chart
twice under an umbrella chart, share nothing), `global` values honoured, proxies in every container and let out by
the network policies, CORS origins on every service, pods rolled when what they read changes, and a `helm test` pod
whose script asks every service. `helm template` only: no cluster (test_helm_chart.py has the rendering's own
invariants and the helpers used here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
import yaml

from tests.deploy.system.test_helm_chart import (
    CHART,
    CHART_META,
    COMPONENTS,
    FULLNAME,
    HELM,
    containers,
    env,
    helm,
    hook_pod,
    objects,
    pod_spec,
    rendered,
    template,
    workloads,
)
from tests.support.loopback_http import LoopbackHTTP, QuietHandler

# helm runs as a process: the system tier (not make test-unit).
pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not installed (the dev extra's helm-binary has it)")

# --- composing: names from the release, globals, an umbrella chart ------------------------------------------------


def selects(selector: dict, labels: dict) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items()


def test_two_releases_in_one_namespace_share_no_object():
    """Every name derives from the release, and every selector and policy names its release: two stacks side by
    side neither collide nor reach into each other."""
    first, second = template(release="alpha"), template(release="beta")
    names = [{(doc["kind"], doc["metadata"]["name"]) for doc in docs} for docs in (first, second)]
    assert not names[0] & names[1]
    for docs, other in ((first, second), (second, first)):
        other_pods = [doc["spec"]["template"]["metadata"]["labels"] for doc in workloads(other).values()]
        for doc in docs:
            selector = (doc["spec"].get("selector") if doc["kind"] in ("Deployment", "StatefulSet",
                                                                        "PodDisruptionBudget")
                        else {"matchLabels": doc["spec"]["selector"]} if doc["kind"] == "Service"
                        else doc["spec"]["podSelector"] if doc["kind"] == "NetworkPolicy" else None)
            if selector is not None:
                assert not any(selects(selector, labels) for labels in other_pods), (doc["kind"], doc["metadata"])
        own = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Service"}
        for workload in workloads(docs).values():  # each service calls its own release's
            for item in workload["spec"]["template"]["spec"]["containers"][0].get("env", []):
                for url in str(item.get("value", "")).split(","):
                    if url.startswith("http://"):
                        assert urlsplit(url).hostname.split(".")[-1] in own, url


@pytest.mark.parametrize(("settings", "release", "prefix"), [
    ([], "chatqna", "chatqna-ovgenai-stack"),
    ([], "ovgenai-stack-prod", "ovgenai-stack-prod"),  # a release named for the chart is not repeated
    (["--set", "nameOverride=rag"], "chatqna", "chatqna-rag"),
    (["--set", "fullnameOverride=shop-ai"], "chatqna", "shop-ai"),
])
def test_names_follow_the_release_and_the_overrides(settings, release, prefix):
    docs = template(*settings, release=release)
    assert {doc["metadata"]["name"] for doc in docs if doc["kind"] != "Namespace"} >= {
        f"{prefix}-{name}" for name in ("backend", "llm", "embedding", "gateway", "models", "api-key", "test")}
    assert all(doc["metadata"]["name"].startswith(prefix) for doc in docs)
    assert workloads(docs)["backend"]["spec"]["serviceName"] == f"{prefix}-backend"


def proxy_env(container: dict) -> dict[str, str]:
    return {name: item["value"] for name, item in env(container).items() if name.lower().endswith("_proxy")}


def every_container(docs: tuple[dict, ...]) -> list[tuple[str, dict]]:
    pods = [*workloads(docs).values(), hook_pod(docs)]
    return [(f"{pod['metadata']['name']}/{c['name']}", c) for pod in pods for c in containers(pod)]


def test_proxies_reach_every_container_init_and_test_ones_included():
    docs = rendered("proxied")
    services = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Service"}
    for where, container in every_container(docs):
        proxies = proxy_env(container)
        assert proxies["http_proxy"] == proxies["HTTP_PROXY"] == "http://proxy.example.com:3128", where
        assert "https_proxy" not in proxies, where  # only what is set: an empty one would hide the other case
        hosts = proxies["no_proxy"].split(",")
        assert proxies["NO_PROXY"] == proxies["no_proxy"] and "mirror.internal" in hosts, where
        assert services <= set(hosts) and {".svc", ".cluster.local", "localhost"} <= set(hosts), where
    assert not any(proxy_env(container) for _, container in every_container(rendered("defaults")))


def test_a_proxy_or_mirror_is_let_out_by_the_network_policies():
    """The policies let pods out to public addresses only: networkPolicy.extraEgress opens the proxy's (or an
    internal mirror's) address for the pods that fetch from outside, and for no other."""
    policies = objects("proxied", "NetworkPolicy")
    extra = policies[f"{FULLNAME}-extra-egress"]
    assert extra["spec"]["egress"] == [{"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}],
                                        "ports": [{"protocol": "TCP", "port": 3128}]}]
    [expression] = extra["spec"]["podSelector"]["matchExpressions"]
    let_out = {name for name, workload in workloads("proxied").items()
               if selects(extra["spec"]["podSelector"], workload["spec"]["template"]["metadata"]["labels"])
               and workload["spec"]["template"]["metadata"]["labels"][expression["key"]] in expression["values"]}
    assert let_out == {"backend", "embedding", "gateway"}  # not the LLM microservice, not Chroma
    assert f"{FULLNAME}-extra-egress" not in objects("defaults", "NetworkPolicy")


def test_allowed_origins_reach_every_service():
    for name, workload in workloads("proxied").items():
        if name != "chroma":
            assert env(containers(workload, init=False)[0])["ALLOWED_ORIGINS"]["value"] == "http://localhost:5173"
    assert all("ALLOWED_ORIGINS" not in env(c) for _, c in every_container(rendered("defaults")))


GLOBALS = ["--set", "global.imageRegistry=registry.example.com/mirror", "--set",
           "global.proxy.httpsProxy=http://proxy.example.com:3128", "--set", "global.somethingOfTheUmbrella=1",
           "--set", "vectorStore.mode=server"]


def test_global_values_are_accepted_and_honoured():
    """An umbrella chart's globals: the image registry (over image.registry, Chroma's too), the proxies; globals this
    chart does not read pass the schema."""
    docs = template(*GLOBALS)
    for where, container in every_container(docs):
        assert container["image"].startswith('registry.example.com/mirror/'), where
        assert proxy_env(container)["https_proxy"] == "http://proxy.example.com:3128", where
    # OPEA's umbrella charts name the proxies global.http_proxy, ...: read too; the chart's own values come first.
    opea = template("--set", "global.http_proxy=http://opea-proxy:912", "--set", "global.no_proxy=.intel.com")
    for where, container in every_container(opea):
        assert proxy_env(container)["HTTP_PROXY"] == "http://opea-proxy:912", where
        assert ".intel.com" in proxy_env(container)["no_proxy"].split(","), where
    own = template("--set", "global.http_proxy=http://opea-proxy:912", "--set", "proxy.httpProxy=http://mine:1")
    assert {proxy_env(c)["http_proxy"] for _, c in every_container(own)} == {"http://mine:1"}


def test_it_installs_as_a_subchart_of_an_umbrella_chart(tmp_path):
    """An umbrella chart that depends on this one (file://), twice under two aliases, with globals: each instance's
    objects are named for the release and its alias, the globals reach every container, and each instance's values
    are its own."""
    umbrella = tmp_path / "umbrella"
    (umbrella / "templates").mkdir(parents=True)
    (umbrella / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "genai-umbrella", "version": "1.0.0", "dependencies": [
            {"name": CHART_META["name"], "version": CHART_META["version"], "repository": f"file://{CHART}",
             "alias": alias} for alias in ("chat", "docs")]}))
    (umbrella / "values.yaml").write_text(yaml.safe_dump({
        "global": {"imageRegistry": "registry.example.com/mirror", "proxy": {"httpProxy": "http://proxy:3128"}},
        "chat": {"models": {"llm": {"id": "org/chat-model"}}},
        "docs": {"models": {"llm": {"id": "org/docs-model"}}, "gateway": {"service": {"type": "ClusterIP"}}}}))
    built = helm("dependency", "build", str(umbrella))
    assert built.returncode == 0, built.stdout + built.stderr
    docs = template(release="shop", chart=umbrella)
    for alias, model in (("chat", "org/chat-model"), ("docs", "org/docs-model")):
        mine = tuple(doc for doc in docs if doc["metadata"]["name"].startswith(f"shop-{alias}-"))
        assert set(workloads(mine)) == COMPONENTS
        assert objects_of(mine, "ConfigMap")[f"shop-{alias}-models"]["data"]["LLM_MODEL_ID"] == model
        backend = workloads(mine)["backend"]
        assert backend["metadata"]["name"] == f"shop-{alias}-backend"
        assert env(containers(workloads(mine)["llm"])[0])["LLM_ENDPOINT"]["value"] == (
            f"http://shop-{alias}-backend-0.shop-{alias}-backend:8008")
        for where, container in every_container(mine):
            assert container["image"].startswith("registry.example.com/mirror/ov-genai-stack/"), where
            assert proxy_env(container)["http_proxy"] == "http://proxy:3128", where
    assert len(docs) == sum(1 for doc in docs if doc["metadata"]["name"].startswith(("shop-chat-", "shop-docs-")))


def objects_of(docs: tuple[dict, ...], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def test_an_umbrella_chart_turns_it_on_and_off_by_its_condition(tmp_path):
    """The usual umbrella: `condition: ovgenai-stack.enabled`, the umbrella's values holding `enabled` and this
    chart's values under its name, and globals. Its dependency is fetched (`helm dependency update`, then `build`
    from the lock as CI does) from a file:// path; lint and template pass with the subchart on and off, on it renders
    the whole stack with the umbrella's values and globals, off nothing of it."""
    umbrella = tmp_path / "umbrella"
    (umbrella / "templates").mkdir(parents=True)
    name = CHART_META["name"]
    (umbrella / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "genai-umbrella", "version": "1.0.0", "dependencies": [
            {"name": name, "version": CHART_META["version"], "repository": f"file://{CHART}",
             "condition": f"{name}.enabled"}]}))
    (umbrella / "values.yaml").write_text(yaml.safe_dump({
        "global": {"imageRegistry": "registry.example.com/mirror", "imagePullSecrets": [{"name": "mirror-pull"}],
                   "proxy": {"httpsProxy": "http://proxy:3128"}},
        name: {"enabled": True, "models": {"llm": {"id": "org/umbrella-model"}},
               "ingress": {"enabled": True, "hosts": ["chat.example.com"]}}}))
    (umbrella / "templates/own.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-umbrella}\ndata: {}\n")
    for step in (["update", "--skip-refresh"], ["build", "--skip-refresh"]):
        fetched = helm("dependency", *step, str(umbrella))
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        assert (umbrella / "Chart.lock").is_file() and len(list((umbrella / "charts").glob(f"{name}-*.tgz"))) == 1
        if step[0] == "update":
            shutil.rmtree(umbrella / "charts")  # build restores it from Chart.lock
    for switch in ("true", "false"):
        linted = helm("lint", "--strict", str(umbrella), "--set", f"{name}.enabled={switch}")
        assert linted.returncode == 0, linted.stdout + linted.stderr
    docs = template(release="shop", chart=umbrella)
    stack = tuple(doc for doc in docs if doc["metadata"]["name"] != "shop-umbrella")
    assert set(workloads(stack)) == COMPONENTS
    assert objects_of(stack, "ConfigMap")[f"shop-{name}-models"]["data"]["LLM_MODEL_ID"] == "org/umbrella-model"
    assert [rule["host"] for rule in objects_of(stack, "Ingress")[f"shop-{name}-gateway"]["spec"]["rules"]] == [
        "chat.example.com"]
    for where, container in every_container(stack):
        assert container["image"].startswith("registry.example.com/mirror/ov-genai-stack/"), where
        assert proxy_env(container)["https_proxy"] == "http://proxy:3128", where
    for pod in [*workloads(stack).values(), hook_pod(stack)]:
        assert {"name": "mirror-pull"} in pod_spec(pod)["imagePullSecrets"], pod["metadata"]["name"]
    off = template("--set", f"{name}.enabled=false", release="shop", chart=umbrella)
    assert [(doc["kind"], doc["metadata"]["name"]) for doc in off] == [("ConfigMap", "shop-umbrella")]


# --- upgrades roll the pods; helm test ------------------------------------------------------------------------------


def checksums(*settings: str) -> dict[str, dict[str, str]]:
    return {name: {key: value for key, value in workload["spec"]["template"]["metadata"]["annotations"].items()
                   if key.startswith("checksum/")}
            for name, workload in workloads(template(*settings)).items()}


def test_a_changed_model_or_key_rolls_the_pods_that_read_it():
    """The pods read the models ConfigMap and the key's Secret at start: their checksums of them change with the
    values, so `helm upgrade --set models.llm.id=...` rolls them (no manual rollout restart). The backend's pods read
    no model name: they are not rolled for a model, which the upgrade's Job prepares and they swap to."""
    before = checksums()
    readers = COMPONENTS - {"backend"}
    assert set(before) == COMPONENTS and all(set(before[name]) == {"checksum/models", "checksum/api-key"}
                                            for name in readers)
    assert set(before["backend"]) == {"checksum/api-key"}
    model = checksums("--set", "models.llm.id=org/other-model")
    key = checksums("--set", "apiKey.value=another-key")
    unrelated = checksums("--set", "llm.replicas=3")
    for name in readers:
        assert model[name]["checksum/models"] != before[name]["checksum/models"], name
    for name in COMPONENTS:
        assert key[name]["checksum/api-key"] != before[name]["checksum/api-key"], name
        assert unrelated[name] == before[name], name
    assert model["backend"] == before["backend"]
    assert checksums() == before  # the same values, the same pods (a generated key does not roll them)


def test_an_upgrade_prepares_the_models_in_a_job_the_backend_swaps_to():
    """`helm upgrade` (not an install, nor the plain manifests) runs `prepare --serve_only` as a post-upgrade hook
    Job on the models volume, with the same container as the init containers and egress to the Hub only."""
    assert not [doc for doc in template() if doc["kind"] == "Job"]
    docs = template("--is-upgrade", "--set", "models.llm.id=org/other-model")
    [job] = [doc for doc in docs if doc["kind"] == "Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-upgrade"
    [container] = pod_spec(job)["containers"]
    backend = pod_spec(workloads(docs)["backend"])
    assert container == backend["initContainers"][0] and container["command"][-1] == "--serve_only"
    [claim] = [v for v in pod_spec(job)["volumes"] if "persistentVolumeClaim" in v]
    assert claim in backend["volumes"]
    [policy] = [doc for doc in docs if doc["kind"] == "NetworkPolicy" and doc["metadata"]["name"].endswith("-sync")]
    assert policy["spec"]["podSelector"]["matchLabels"] == pod_spec_labels(job)
    assert [rule["ports"] for rule in policy["spec"]["egress"]] == [[{"protocol": "TCP", "port": 443}]]


def pod_spec_labels(job: dict) -> dict[str, str]:
    labels = job["spec"]["template"]["metadata"]["labels"]
    return {key: labels[key] for key in ("app.kubernetes.io/component", "app.kubernetes.io/instance",
                                         "app.kubernetes.io/name")}


def test_helm_test_asks_every_service_and_the_gateway_a_question():
    """The `helm test` hook pod's script, run against stand-in services at the addresses it is given: it asks each
    one's /health and one chat question through the gateway, with the key, and fails on a service that is down."""
    pod = hook_pod("defaults")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    [container] = pod["spec"]["containers"]
    variables = env(container)
    assert {variables[f"{name}_URL"]["value"] for name in ("BACKEND", "LLM", "EMBEDDING", "GATEWAY")} == {
        f"http://{FULLNAME}-{name}:{port}" for name, port in (("backend", 8008), ("llm", 9000), ("embedding", 6000),
                                                              ("gateway", 8888))}
    assert container["command"] == ["python", "-c"]
    script = container["args"][0]
    seen: list[tuple[str, str, str | None]] = []

    names: dict[int, str] = {}  # by port
    down: set[str] = set()  # the services that answer 503

    class Service(QuietHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            name = names[self.server.server_port]
            seen.append((name, self.path, self.headers.get("Authorization")))
            self.reply(503 if name in down else 200, {"status": "ok"})

        def do_POST(self):  # noqa: N802
            question = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((names[self.server.server_port], self.path, self.headers.get("Authorization")))
            assert question["stream"] is False and question["messages"]
            self.reply(200, {"choices": [{"message": {"role": "assistant", "content": "An inference toolkit."}}]})

    servers = {name: LoopbackHTTP(Service) for name in ("BACKEND", "LLM", "EMBEDDING", "GATEWAY")}
    names.update({server.port: name for name, server in servers.items()})
    try:
        urls = {f"{name}_URL": server.url for name, server in servers.items()}
        run_env = {"PATH": os.environ["PATH"], "API_KEY": "k-9f3e", **urls}
        result = subprocess.run([sys.executable, "-c", script], env=run_env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        assert "chat through the gateway: An inference toolkit." in result.stdout
        assert seen == [*[(name, "/health", "Bearer k-9f3e") for name in ("BACKEND", "LLM", "EMBEDDING", "GATEWAY")],
                        ("GATEWAY", "/v1/chatqna", "Bearer k-9f3e")]
        down.add("EMBEDDING")
        failed = subprocess.run([sys.executable, "-c", script], env=run_env, capture_output=True, text=True,
                                timeout=60)
        assert failed.returncode != 0 and "503" in failed.stderr
    finally:
        for server in servers.values():
            server.stop()
