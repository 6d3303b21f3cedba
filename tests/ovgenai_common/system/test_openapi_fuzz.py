"""Every service fuzzed from its own OpenAPI document with schemathesis, on real servers. A fixed seed and a fixed
number of cases per operation (not a time budget, which would generate more cases on a faster machine) make every
run send the same requests. The number is set by what an operation costs: operations that generate text (each
valid case runs the model) get fewer cases than the rest, with the same seed.

Checks: no 5xx; every status is documented; every response matches its documented schema and content type, which
for errors is OpenAI's shape; and (where the schema is the whole contract) bodies that break the schema are refused.
The backend under test caps prompt + completion at 32 tokens, so generated requests stay cheap.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import gateway_env
from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, ROOT, RemoteServer, llm_microservice

SEED = "20261122"
CASES_PER_OPERATION = 150
GENERATION_CASES = 40
# The operations whose valid requests run the model (the gateway's through retrieval, embedding and the LLM).
GENERATION_PATHS = r"(completions|chatqna|responses|messages)$"
# The backend serves one router under /v1 and /v3 (OVMS's prefix; tests/ovgenai_server/test_app.py holds that both
# serve the same routes): fuzzing both would send every case twice.
V1_ONLY = r"^(?!/v3/)"
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


@pytest.fixture(scope="module")
def fuzz_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--max_tokens_limit", "32"]) as server:
        yield server


@pytest.fixture(scope="module")
def fuzz_llm(fuzz_backend, default_model):
    with llm_microservice(fuzz_backend.url, default_model) as server:
        yield server


@pytest.fixture(scope="module")
def fuzz_gateway(embedding_service, fuzz_llm, tmp_path_factory):
    env = gateway_env(embedding_service.url, fuzz_llm.url, tmp_path_factory.mktemp("fuzz-gateway"))
    with RemoteServer("ovgenai_services.gateway", env=env, health_path="/v1/health_check") as server:
        yield server


def fuzz(url: str, refuse_schema_violations: bool = True, generates: bool = True, paths: str = "") -> None:
    """`paths`: a regex the fuzzed paths start with (all of them when empty)."""
    checks = CHECKS + (",negative_data_rejection" if refuse_schema_violations else "")
    runs = [(CASES_PER_OPERATION, ["--include-path-regex", paths or "^", "--exclude-path-regex", GENERATION_PATHS])]
    if generates:
        runs.append((GENERATION_CASES, ["--include-path-regex", f"{paths}.*{GENERATION_PATHS}"]))
    for cases, selection in runs:
        command = [
            sys.executable, "-m", "schemathesis.cli", "run", f"{url}/openapi.json", "--checks", checks,
            "--seed", SEED, "--max-examples", str(cases), "--workers", "1", "--phases", "coverage,fuzzing",
            "--request-timeout", "120", "--generation-database", "none", *selection,
        ]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        report = result.stdout[-6000:] + result.stderr[-2000:]
        assert result.returncode == 0, report
        assert " passed" in result.stdout, report  # it did test something


def test_backend(fuzz_backend):
    fuzz(fuzz_backend.url, paths=V1_ONLY)
    # Whatever the fuzz sent, no request stopped the model for the others.
    assert metric(fuzz_backend.url, "ovgenai:engine_restarts_total") == 0


def test_embedding_service(embedding_service):
    fuzz(embedding_service.url, generates=False)


def test_llm_microservice(fuzz_llm):
    fuzz(fuzz_llm.url)


def test_gateway(fuzz_gateway):
    # Its OPEA bodies are lenient on purpose (OPEA clients send fields of their own), and multipart forms take one
    # value where the schema says a list, so "schema-violating data is refused" is not its contract.
    fuzz(fuzz_gateway.url, refuse_schema_violations=False)
