"""compose/compose.yaml, rendered as compose renders it: ports on 127.0.0.1 unless HOST_BIND says otherwise (the
monitoring profile's unless MONITORING_BIND does), the one API_KEY reaching every service and every key a service
sends downstream, memory limits, Chroma unpublished, Grafana with no default password, and images that still listen
on every interface inside their container."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import yaml

from tests.support.compose import COMPOSE, env_example, interpolate
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
    """The stack's own servers (built from this project, with a healthcheck): not Chroma, not the models job, not
    the monitoring profile's Prometheus and Grafana (checked on their own)."""
    return {name: s for name, s in services.items() if "healthcheck" in s and "build" in s}


@pytest.mark.parametrize("variables", [{}, env_example()], ids=["defaults", "env-example"])
def test_ports_are_published_on_loopback_by_default(variables):
    services = rendered(**variables)
    published = {name: s["ports"] for name, s in services.items() if s.get("ports")}
    # Not Chroma, not models; Prometheus and Grafana (the monitoring profile) on the same terms as the services.
    assert set(published) == {"vllm-openvino", "llm", "embedding", "chatqna-gateway", "prometheus", "grafana"}
    for name, ports in published.items():
        for port in ports:
            assert port.startswith("127.0.0.1:") and port.count(":") == 2, (name, port)


MONITORING = ("prometheus", "grafana")


def test_host_bind_publishes_on_the_address_it_names_but_not_the_monitoring():
    """Publishing the services must not publish Prometheus, which has no sign-in, nor Grafana."""
    for name, service in rendered(HOST_BIND="0.0.0.0").items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:" if name in MONITORING else "0.0.0.0:"), (name, port)
    for name in MONITORING:
        assert all(port.startswith("0.0.0.0:") for port in rendered(MONITORING_BIND="0.0.0.0")[name]["ports"])


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


def test_prometheus_scrapes_every_service_with_the_api_key():
    services = rendered(API_KEY="k-123")
    prometheus = services["prometheus"]
    assert prometheus["environment"]["SCRAPE_API_KEY"] == "k-123"
    assert "/prometheus/.api_key" in prometheus["entrypoint"][-1] and "umask 077" in prometheus["entrypoint"][-1]
    config = yaml.safe_load((ROOT / "deploy/monitoring/prometheus.yml").read_text())
    targets = {target for job in config["scrape_configs"] for group in job["static_configs"]
               for target in group["targets"]}
    expected = {f"{name}:{service['environment']['PORT']}" for name, service in servers(services).items()}
    assert targets == expected
    assert all(job["authorization"]["credentials_file"] == "/prometheus/.api_key" for job in config["scrape_configs"])


def test_grafana_has_no_anonymous_access_and_reports_nothing_out():
    environment = rendered(**env_example())["grafana"]["environment"]
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert environment["GF_ANALYTICS_REPORTING_ENABLED"] == environment["GF_ANALYTICS_CHECK_FOR_UPDATES"] == "false"


@pytest.mark.parametrize("variables", [{}, env_example()], ids=["defaults", "env-example"])
def test_grafana_has_no_default_password(variables):
    grafana = rendered(**variables)["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == ""
    assert rendered(GRAFANA_ADMIN_PASSWORD="s3cret")["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret"
    assert grafana["entrypoint"][:2] == ["/bin/sh", "-c"] and "exec /run.sh" in grafana["entrypoint"][2]


def test_no_variable_is_required_by_compose():
    """Compose interpolates the whole file before it applies profiles: a required variable (`${X:?}`) of the
    monitoring profile would stop `docker compose up` of the default one. Grafana's entrypoint checks instead."""
    for name in ("compose.yaml", "compose.gpu.yaml", "compose.export.yaml"):
        assert not re.search(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?\?", (ROOT / "compose" / name).read_text()), name


def test_monitoring_images_have_versioned_tags():
    services = rendered()
    for name in ("prometheus", "grafana"):
        image = services[name]["image"]
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", image), image
        assert services[name]["profiles"] == ["monitoring"] and "healthcheck" in services[name]


@pytest.mark.parametrize("variables", [{}, env_example()], ids=["defaults", "env-example"])
def test_images_built_here_are_never_pulled_by_default(variables):
    """A missing image is built from this repository, never looked for in a registry, unless PULL_POLICY says so
    (images you pushed to REGISTRY)."""
    services = rendered(**variables)
    built = {name: s for name, s in services.items() if "build" in s}
    assert {"models", "vllm-openvino", "llm", "embedding", "chatqna-gateway"} <= set(built)
    assert {name: s.get("pull_policy") for name, s in built.items()} == dict.fromkeys(built, "never")
    assert all(s["pull_policy"] == "missing" for s in rendered(PULL_POLICY="missing").values() if "build" in s)


BUILT = {"models": "models", "vllm-openvino": "backend", "llm": "llm", "embedding": "embedding",
         "chatqna-gateway": "gateway"}


@pytest.mark.parametrize("variables", [{}, env_example()], ids=["defaults", "env-example"])
def test_images_have_this_projects_own_names(variables):
    """REGISTRY/ov-genai-stack/<Dockerfile target>:TAG, as the build scripts, the launch scripts and the chart name
    them: never OPEA's published opea/ names, which a build would overwrite and a pull would fetch."""
    services = rendered(**variables)
    assert {name: s["image"] for name, s in services.items() if "build" in s} == {
        name: f"localhost/ov-genai-stack/{target}:latest" for name, target in BUILT.items()}
    assert all(services[name]["build"]["target"] == target for name, target in BUILT.items())
    ours = rendered(REGISTRY="registry.example.com/team", TAG="0.1.0")
    assert all(ours[name]["image"] == f"registry.example.com/team/ov-genai-stack/{target}:0.1.0"
               for name, target in BUILT.items())
    for name in ("compose.yaml", "compose.gpu.yaml", "compose.export.yaml", ".env.example"):
        assert "opea/" not in (ROOT / "compose" / name).read_text(), name


def test_the_conversion_tools_are_an_override_away():
    """The default stack builds no torch (its models service is the models image); compose.export.yaml swaps in the
    models-export image, with the conversion tools, for a Transformers checkpoint, and changes nothing else."""
    variables = env_example()
    assert {name: s["build"]["target"] for name, s in rendered(**variables).items() if "build" in s} == BUILT
    export = interpolate(yaml.safe_load((ROOT / "compose/compose.export.yaml").read_text()), variables)["services"]
    assert list(export) == ["models"]
    assert export["models"]["image"] == "localhost/ov-genai-stack/models-export:latest"
    assert export["models"]["build"]["target"] == "models-export" and export["models"]["pull_policy"] == "never"
    assert export["models"]["build"]["args"]["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"


PROXIES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")


@pytest.mark.parametrize("variables", [{}, env_example()], ids=["defaults", "env-example"])
def test_proxies_reach_every_container_and_build(variables):
    """A corporate network's proxy, as set where compose runs (a variable without a value: compose passes it when
    set and leaves it unset otherwise, so that an empty http_proxy never hides HTTP_PROXY); no_proxy keeps the
    user's hosts and adds every service name of the stack, which the services call each other by."""
    services = rendered(**{**variables, "no_proxy": "mirror.internal", "NO_PROXY": "10.0.0.0/8"})
    for name, service in services.items():
        environment = service["environment"]
        assert all(proxy in environment and environment[proxy] is None for proxy in PROXIES), name
        for variable in ("no_proxy", "NO_PROXY"):
            hosts = environment[variable].split(",")
            assert {"mirror.internal", "10.0.0.0/8", "localhost", "127.0.0.1"} <= set(hosts), name
            assert set(services) - {"prometheus", "grafana", "models"} <= set(hosts), name
        if "build" in service:  # lower case: what apt, pip and curl read
            assert set(service["build"]["args"]) == {"http_proxy", "https_proxy", "no_proxy"}, name


def test_allowed_origins_reach_every_server():
    for name, service in servers(rendered(ALLOWED_ORIGINS="http://localhost:5173")).items():
        assert service["environment"]["ALLOWED_ORIGINS"] == "http://localhost:5173", name
