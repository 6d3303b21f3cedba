"""The monitoring profile against live services: every metric the Grafana dashboard's queries name is one that a
service exports (each service's /metrics scraped here), and a real Prometheus (Debian's package, unpacked into
.cache/tools by `make test-tools`, or one on PATH) scrapes a running backend and evaluates the dashboard's
queries."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import gateway_env
from tests.support.servers import ROOT, RemoteServer, free_port, wait_until

DASHBOARD = ROOT / "deploy/monitoring/grafana/ovgenai.json"
# PromQL's functions, aggregations and keywords: every other bare name in an expression is a metric.
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
             "gauge": ("",), "summary": ("_sum", "_count", "_created"), "unknown": ("",)}


def dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metrics an expression reads: label matchers, `by (...)` lists, ranges and strings removed, then every
    name that is not called as a function and is not a keyword."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare)
    bare = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", bare)
    names = re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\()?", bare)
    return {name for name, call in names if not call and name.lower() not in PROMQL_WORDS}


def exported(url: str) -> set[str]:
    """Every series name a /metrics page can carry (a labelled metric not yet observed still has its TYPE line)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
    return names


def test_the_metric_name_parser():
    assert metric_names('histogram_quantile(0.9, sum by (le, path) (rate(a_b_bucket{x=~"$m"}[$__rate_interval])))'
                        ) == {"a_b_bucket"}
    assert metric_names('sum by (job, kind) (rate(http_responses_total{kind!="ok"}[5m])) or min(ovgenai:x)') == \
        {"http_responses_total", "ovgenai:x"}


@pytest.fixture(scope="module")
def gateway(embedding_service, llm_service, tmp_path_factory):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path_factory.mktemp("gateway-data"))
    with RemoteServer("ovgenai_services.gateway", env=env) as server:
        yield server


def test_every_dashboard_query_names_only_exported_metrics(backend, llm_service, embedding_service, gateway):
    available = set().union(*(exported(s.url) for s in (backend, llm_service, embedding_service, gateway)))
    queries = dashboard_queries()
    assert len(queries) >= 20
    for expr in queries:
        names = metric_names(expr)
        assert names, expr
        assert names <= available, f"{expr}: {sorted(names - available)} exported by no service"


@pytest.fixture
def prometheus(backend, tmp_path):
    unpacked = ROOT / ".cache/tools/prometheus/usr/bin/prometheus"
    binary = str(unpacked) if unpacked.is_file() else shutil.which("prometheus")
    if binary is None:
        pytest.skip("no Prometheus: `make test-tools` unpacks Debian's package into .cache/tools (it needs apt's "
                    "package lists), or put a prometheus binary on PATH")
    # The compose profile's configuration, pointed at the test's backend and scraping every second.
    config = yaml.safe_load((ROOT / "deploy/monitoring/prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "ovgenai-server")
    job.pop("authorization")  # the test's backend has no API key
    job["static_configs"] = [{"targets": [backend.url.removeprefix("http://")]}]
    # The labels a ServiceMonitor's scrape gives a pod's series in a cluster, which the adapter rule selects on.
    job["relabel_configs"] = [*job.get("relabel_configs", []), {"target_label": "namespace", "replacement": "ovgenai"},
                              {"target_label": "pod", "replacement": "vllm-openvino-0"}]
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["scrape_configs"] = [job]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{free_port()}"
    with open(tmp_path / "prometheus.log", "wb") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address={url.removeprefix('http://')}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            def ready() -> bool:
                assert process.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
                try:
                    return httpx.get(url + "/-/ready", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(ready, 60, 0.2, "Prometheus to be ready")
            yield url
        finally:
            process.terminate()
            process.wait(30)


def query(url: str, expr: str) -> list:
    response = httpx.get(url + "/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", (expr, body)
    return body["data"]["result"]


def test_prometheus_evaluates_the_autoscaler_s_adapter_rule(prometheus):
    """The HPA's metric exists: the chart's prometheus-adapter rule finds the backend's series in Prometheus, names
    it as the HPA asks for it, and its query gives a number per pod."""
    adapter = next(doc for doc in yaml.safe_load_all((ROOT / "deploy/kubernetes/prometheus-adapter-rules.yaml")
                                                     .read_text()) if doc)
    [rule] = yaml.safe_load(adapter["data"]["values.yaml"])["rules"]["custom"]
    hpa = next(doc for doc in yaml.safe_load_all((ROOT / "deploy/kubernetes/backend-hpa.yaml").read_text()) if doc)
    [metric] = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]]
    wait_until(lambda: bool(query(prometheus, rule["seriesQuery"])), 60, 0.5, "the adapter rule's series")
    [series] = query(prometheus, rule["seriesQuery"])
    assert re.sub(rule["name"]["matches"], rule["name"]["as"], series["metric"]["__name__"]) == metric
    expr = (rule["metricsQuery"].replace("<<.Series>>", series["metric"]["__name__"])
            .replace("<<.LabelMatchers>>", 'namespace="ovgenai",pod=~"vllm-openvino-0"').replace("<<.GroupBy>>", "pod"))
    [per_pod] = query(prometheus, expr)
    assert per_pod["metric"] == {"pod": "vllm-openvino-0"} and float(per_pod["value"][1]) >= 0


def test_prometheus_scrapes_the_backend_and_evaluates_the_dashboard(prometheus, backend, default_model):
    wait_until(lambda: [r["value"][1] for r in query(prometheus, 'up{job="ovgenai-server"}')] == ["1"], 60, 0.5,
               "Prometheus to scrape the backend")
    body = {"model": default_model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8,
            "stream": True}

    def chat() -> None:
        assert httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=120).status_code == 200

    # A rate needs the series before the request it counts: the first request makes the labelled series, Prometheus
    # scrapes it, and the second one is what the dashboard's rate sees.
    chat()
    wait_until(lambda: bool(query(prometheus, "ovgenai:time_to_first_token_seconds_count")), 60, 0.5,
               "Prometheus to scrape the backend's first request")
    chat()
    # Grafana's variables as Grafana fills them in: every model, a range of one minute.
    queries = [q.replace("$__rate_interval", "1m").replace("$model", ".*") for q in dashboard_queries()]
    for expr in queries:
        query(prometheus, expr)  # every query is valid PromQL for Prometheus itself
    ttft = next(q for q in queries if "time_to_first_token" in q and "0.5," in q)

    def ttft_p50() -> float | None:
        result = query(prometheus, ttft)
        value = float(result[0]["value"][1]) if result else float("nan")
        return value if value == value else None  # NaN until a scrape has seen the request

    wait_until(lambda: ttft_p50() is not None, 60, 0.5, "the backend's time to first token in Prometheus")
    assert ttft_p50() > 0
