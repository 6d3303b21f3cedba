"""The container path as a new user walks it (`make test-containers`): every image built with the build scripts,
the compose stack started from `.env.example` with its models prepared by the one-shot `models` service, the
OVMS and OPEA guides' requests through the published ports, a crash healed by the restart policy, `down -v`
leaving nothing behind, and the launch scripts in Docker mode.

Health is each service's healthcheck command from the compose file, run in its container with `docker exec`.
Podman runs no healthcheck timers, so there the harness runs `podman healthcheck run` while compose waits on
`service_healthy`, as Docker's timers would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from tests.containers.engine import Engine, find_engine
from tests.gateway.facts import grounded
from tests.support.servers import DEFAULT_MODEL, MODELS, ROOT, free_port, wait_until

IMAGES = {  # image -> (build script, its argument)
    "localhost/ov-genai-stack/backend:latest": ("build_docker_vllm_openvino.sh", "cpu"),
    "localhost/ov-genai-stack/backend-gpu:latest": ("build_docker_vllm_openvino.sh", "gpu"),
    "localhost/ov-genai-stack/llm:latest": ("build_docker_microservice.sh", "llm"),
    "localhost/ov-genai-stack/embedding:latest": ("build_docker_microservice.sh", "embedding"),
    "localhost/ov-genai-stack/gateway:latest": ("build_docker_microservice.sh", "gateway"),
    "localhost/ov-genai-stack/models:latest": ("build_docker_microservice.sh", "models"),
}
# The conversion tools' image (torch, optimum-intel, NNCF: ~2 GB, several minutes more on 2 cores) only when asked
# for: OVGENAI_TEST_EXPORT_IMAGE=1 make test-containers. Compose and the chart use it only for a checkpoint.
EXPORT_IMAGE = "localhost/ov-genai-stack/models-export:latest"
if os.environ.get("OVGENAI_TEST_EXPORT_IMAGE") == "1":
    IMAGES[EXPORT_IMAGE] = ("build_docker_microservice.sh", "models-export")
# What the light images must not carry: torch (the models image), and the packages nothing imports.
EXCLUDED = [line.split("#")[0].strip() for line in (ROOT / "scripts/excluded-packages.txt").read_text().splitlines()
            if line.split("#")[0].strip()]
SERVERS = ("vllm-openvino", "llm", "embedding", "chatqna-gateway")
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
COMPOSE = yaml.safe_load((ROOT / "compose/compose.yaml").read_text())
KEY = "compose-test-key"  # the stack runs with API_KEY set, as a deployment reachable by others would
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def engine() -> Engine:
    found = find_engine()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def local_torch_wheels() -> list[Path]:
    """torch CPU wheels in pip's configured find-links (machines without PyTorch's index carry them there)."""
    listed = subprocess.run([str(Path(sys.executable).parent / "pip"), "config", "list"], capture_output=True,
                            text=True).stdout
    folders = [Path(value.strip("'\"")) for line in listed.splitlines() if "find-links" in line
               for value in line.split("=", 1)[1].split()]
    return [wheel for folder in folders if folder.is_dir() for wheel in folder.glob("torch-*+cpu-*.whl")]


@pytest.fixture(scope="module")
def images(engine) -> dict[str, float]:
    """Build every image with the project's scripts; seconds per build."""
    build_args: list[str] = []
    wheels = local_torch_wheels() if EXPORT_IMAGE in IMAGES else []
    for wheel in wheels:  # an offline build of the export image: the CPU torch from this machine's wheels
        target = ROOT / "docker/wheels" / wheel.name
        if not target.exists():
            shutil.copyfile(wheel, target)
    if wheels:
        build_args = ["--build-arg", "TORCH_INDEX="]
    seconds = {}
    for image, (script, argument) in IMAGES.items():
        start = time.monotonic()
        extra = build_args if argument == "models-export" else []
        engine.run("bash", f"scripts/{script}", argument, *extra, timeout=1200)
        seconds[image] = time.monotonic() - start
    return seconds


def inspect(engine: Engine, image: str) -> dict:
    return json.loads(engine.docker("image", "inspect", image).stdout)[0]


@pytest.mark.timeout(3600)  # the images are built in this test's set-up: ~8 minutes from nothing on 2 cores
def test_every_image_builds_runs_unprivileged_and_keeps_its_healthcheck(engine, images):
    sizes = {}
    for image in IMAGES:
        config = inspect(engine, image)
        sizes[image] = config["Size"] / 1e6
        assert config["Config"]["User"] == "1000", image
        labels = config["Config"]["Labels"] or {}
        assert labels.get("org.opencontainers.image.version") and labels.get("org.opencontainers.image.revision") \
            not in (None, "", "unknown"), (image, labels)  # the build scripts set them
        assert labels.get("org.opencontainers.image.licenses") == "Apache-2.0", image
        # The image's history keeps its HEALTHCHECK on every engine (Podman's Docker API leaves it out of inspect).
        history = engine.docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
        healthcheck = [line for line in history.splitlines() if "HEALTHCHECK" in line]
        if "models" in image:
            assert not healthcheck
        else:
            assert healthcheck and "ovgenai_common.healthcheck" in healthcheck[0], image
        no_compiler = engine.docker("run", "--rm", "--entrypoint", "sh", image, "-c",
                                    "! command -v gcc && ! command -v cc", check=False)
        assert no_compiler.returncode == 0, f"{image} carries a compiler"
    print("\nimage sizes (MB) and build seconds:",  # noqa: T201 - reported with -s, and in the README
          {i: (round(sizes[i]), round(images[i])) for i in IMAGES})


def absent(engine: Engine, image: str, modules: list[str]) -> list[str]:
    """Which of `modules` the image's Python cannot find."""
    probe = "import importlib.util, sys; print(*[m for m in sys.argv[1:] if importlib.util.find_spec(m) is None])"
    return engine.docker("run", "--rm", "--entrypoint", "python", image, "-c", probe, *modules).stdout.split()


def test_the_images_compose_and_the_chart_run_carry_no_torch(engine, images):  # noqa: ARG001
    """The models image (every compose stack's first build, every backend and embedding pod's init container)
    prepares the default models, IR and GGUF without torch, in well under the ~2 GB the torch image took; no image
    carries the packages nothing imports. The export image, when built, has the conversion tools."""
    size = inspect(engine, "localhost/ov-genai-stack/models:latest")["Size"] / 1e6
    assert size < 1300, f"the models image takes {size:.0f} MB"
    assert absent(engine, "localhost/ov-genai-stack/models:latest", ["torch", "optimum", "nncf"]) == [
        "torch", "optimum", "nncf"]
    for image in ("localhost/ov-genai-stack/gateway:latest", "localhost/ov-genai-stack/models:latest"):
        assert absent(engine, image, EXCLUDED) == EXCLUDED, image
    if EXPORT_IMAGE in images:
        assert absent(engine, EXPORT_IMAGE, ["torch", "optimum.intel", "nncf", "transformers"]) == []
        converts = engine.docker("run", "--rm", "--entrypoint", "python", EXPORT_IMAGE, "-c",
                                 "import torch, optimum.exporters.openvino, nncf; print(torch.__version__)")
        assert converts.stdout.strip().endswith("+cpu"), converts.stdout + converts.stderr
    print(f"\nmodels image: {size:.0f} MB without torch")  # noqa: T201 - reported with -s


def test_a_code_change_rebuilds_only_the_source_layer(engine, images):  # noqa: ARG001 - needs the images
    marker = ROOT / "ovgenai_services/llm/_rebuild_probe.py"
    marker.write_text("# a one-line change\n")
    try:
        start = time.monotonic()
        result = engine.run("bash", "scripts/build_docker_microservice.sh", "llm")
        elapsed = time.monotonic() - start
    finally:
        marker.unlink()
    output = result.stdout + result.stderr  # BuildKit reports on stderr
    dependency_steps = [line for line in output.splitlines() if "pip install" in line]
    assert dependency_steps, output[-2000:]
    cached = output.count("Using cache") + output.count("CACHED")  # Podman/classic builder, BuildKit
    assert cached >= len(dependency_steps), output[-3000:]
    engine.run("bash", "scripts/build_docker_microservice.sh", "llm")  # back to the tree as committed
    print(f"\nrebuild after a one-line change: {elapsed:.1f} s")  # noqa: T201


def test_gpu_image_loads_openvinos_gpu_plugin(engine, images):  # noqa: ARG001
    """No GPU here, but the plugin library and the OpenCL runtime it links must load in the image."""
    probe = ("import openvino as ov, ctypes, pathlib; print(ov.Core().get_versions('GPU')['GPU'].description); "
             "ctypes.CDLL('libOpenCL.so.1'); ctypes.CDLL('libze_loader.so.1'); "
             "print(pathlib.Path('/etc/OpenCL/vendors/intel.icd').read_text())")
    result = engine.docker("run", "--rm", "--entrypoint", "python", "localhost/ov-genai-stack/backend-gpu:latest",
                           "-c", probe)
    assert "Intel GPU plugin" in result.stdout and "libigdrcl" in result.stdout, result.stdout


# --- the compose stack -------------------------------------------------------------------------------------------


class Stack:
    def __init__(self, engine: Engine, folder: Path, api_key: str = ""):
        self.engine, self.project = engine, f"ovgenai-test-{uuid.uuid4().hex[:8]}"
        self.env_file = folder / ".env"
        variables = (ROOT / "compose/.env.example").read_text()  # `cp .env.example .env`, as the README says
        variables = variables.replace("\nAPI_KEY=\n", f"\nAPI_KEY={api_key}\n")
        self.ports = {name: free_port() for name in ("BACKEND_PORT", "LLM_PORT", "EMBEDDING_PORT", "GATEWAY_PORT")}
        for name, port in self.ports.items():  # free ports, so the test never collides with a running stack
            variables = variables.replace(f"\n{name}=", f"\n{name}={port}\n# was: ")
        self.env_file.write_text(variables)

    def compose(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
        return self.engine.run(*self.engine.compose, "-p", self.project, "--env-file", str(self.env_file),
                               "-f", "compose/compose.yaml", *args, check=check, timeout=timeout)

    def url(self, port: str) -> str:
        return f"http://127.0.0.1:{self.ports[port]}"

    def container(self, service: str) -> str:
        return self.compose("ps", "-a", "-q", service).stdout.split()[0]

    def state(self, service: str) -> dict:
        return json.loads(self.engine.docker("inspect", self.container(service)).stdout)[0]

    def healthy(self, service: str) -> bool:
        """The service's healthcheck command from the compose file, run in its container."""
        state = self.state(service)
        if not state["State"]["Running"]:
            return False
        test = COMPOSE["services"][service]["healthcheck"]["test"]
        command = test[1:] if test[0] == "CMD" else ["sh", "-c", test[1]]
        return self.engine.docker("exec", state["Id"], *command, check=False, timeout=30).returncode == 0

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", check=False).stdout[-6000:]


@pytest.fixture(scope="module")
def stack(engine, images, tmp_path_factory):  # noqa: ARG001 - the images must exist
    stack = Stack(engine, tmp_path_factory.mktemp("compose"), api_key=KEY)
    try:
        up = subprocess.Popen([*engine.compose, "-p", stack.project, "--env-file", str(stack.env_file), "-f",
                               "compose/compose.yaml", "up", "-d", "--no-build"], cwd=ROOT, env=engine.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def up_done() -> bool:  # compose waits on `service_healthy`: drive the checks where no timer runs them
            engine.run_healthchecks(stack.project)
            return up.poll() is not None

        wait_until(up_done, 900, interval=2, message="docker compose up")
        assert up.returncode == 0, up.stdout.read()[-3000:]
        for service in SERVERS:
            wait_until(lambda s=service: stack.healthy(s), 300, interval=1, message=f"{service} to be healthy")
        yield stack
    except BaseException:
        print(stack.logs())  # noqa: T201 - the reason, in the failure report
        raise
    finally:
        stack.compose("down", "-v", "--remove-orphans", check=False)


def test_models_were_prepared_by_the_one_shot_service(stack):
    state = stack.state("models")
    assert state["State"]["Status"] == "exited" and state["State"]["ExitCode"] == 0
    assert "models ready in /models" in stack.compose("logs", "--no-color", "models").stdout


def test_backend_answers_the_ovms_guide(stack):
    base = stack.url("BACKEND_PORT")
    chat = {"model": DEFAULT_MODEL, "max_tokens": 30, "temperature": 0, "stream": False,
            "messages": [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "What are the 3 main tourist attractions in Paris?"}]}
    for prefix in ("/v3", "/v1"):
        reply = httpx.post(base + prefix + "/chat/completions", json=chat, headers=AUTH, timeout=120)
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"], reply.text
        completion = httpx.post(base + prefix + "/completions", timeout=120, headers=AUTH,
                                json={"model": DEFAULT_MODEL, "prompt": "This is a test", "max_tokens": 10,
                                      "temperature": 0})
        assert completion.status_code == 200 and completion.json()["usage"]["completion_tokens"] > 0
    config = httpx.get(base + "/v1/config", headers=AUTH, timeout=10)
    assert config.status_code == 200 and DEFAULT_MODEL in config.json()


def test_llm_microservice_answers_the_opea_guide(stack):
    base = stack.url("LLM_PORT")
    health = httpx.get(base + "/v1/health_check", headers={"Content-Type": "application/json"}, timeout=10)
    assert health.content == (b'{"Service Title":"opea_service@llm_vllm/MicroService",'
                              b'"Service Description":"OPEA Microservice Infrastructure"}')
    for messages in ("What is Deep Learning?", [{"role": "user", "content": "What is Deep Learning?"}]):
        body = {"model": DEFAULT_MODEL, "messages": messages, "max_tokens": 17}
        streamed = httpx.post(base + "/v1/chat/completions", json=body, headers=AUTH, timeout=120)
        assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")
        unary = httpx.post(base + "/v1/chat/completions", json={**body, "stream": False}, headers=AUTH, timeout=120)
        assert unary.status_code == 200 and unary.json()["choices"][0]["message"]["content"]


def test_with_api_key_every_port_refuses_a_request_without_it(stack):
    """API_KEY in .env: the LLM microservice, the embedding service and the gateway (not only the backend) refuse a
    request without it, the probes and the chat page stay open, and every port is published on loopback only."""
    requests = {"BACKEND_PORT": "/v1/chat/completions", "LLM_PORT": "/v1/chat/completions",
                "EMBEDDING_PORT": "/v1/embeddings", "GATEWAY_PORT": "/v1/chatqna"}
    body = {"model": DEFAULT_MODEL, "messages": "Hello", "input": "Hello", "max_tokens": 2, "stream": False}
    for port, path in requests.items():
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = httpx.post(stack.url(port) + path, json=body, headers=headers, timeout=30)
            assert refused.status_code == 401, (port, refused.text)
            assert refused.json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(stack.url(port) + "/metrics", timeout=10).status_code == 401, port
        assert httpx.get(stack.url(port) + "/health", timeout=10).status_code == 200, port
    assert httpx.get(stack.url("GATEWAY_PORT") + "/", timeout=10).status_code == 200
    for service in SERVERS:
        bindings = stack.state(service)["NetworkSettings"]["Ports"]
        assert {b["HostIp"] for ports in bindings.values() if ports for b in ports} == {"127.0.0.1"}, service


def test_embedding_service_embeds(stack):
    client = openai.OpenAI(base_url=stack.url("EMBEDDING_PORT") + "/v1", api_key=KEY, max_retries=0)
    vectors = client.embeddings.create(model=EMBEDDER, input=["What is Deep Learning?", "OpenVINO"])
    assert [len(item.embedding) for item in vectors.data] == [384, 384]


def test_ingest_then_chatqna_cites_the_file(stack):
    base = stack.url("GATEWAY_PORT")
    text = "The mascot of the Zorblat festival is a purple heron named Fitch. It was chosen by vote in 1987."
    upload = [("files", ("festival.txt", text.encode(), "text/plain"))]
    ingested = httpx.post(base + "/v1/dataprep/ingest", files=upload, headers=AUTH, timeout=120)
    assert ingested.status_code == 200, ingested.text
    question = "What is the name of the Zorblat festival mascot?"
    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(model="chatqna", messages=[{"role": "user", "content": question}],
                                           max_tokens=30)
    sources = reply.model_extra["sources"]
    assert sources[0]["document"] == "festival.txt"
    assert grounded(reply.choices[0].message.content, text, question), reply.choices[0].message.content


def _crash(engine: Engine, container: str) -> None:
    """Kill the container's main process as a crash would (not `docker kill`, which counts as a manual stop)."""
    pid = json.loads(engine.docker("inspect", container).stdout)[0]["State"]["Pid"]
    try:
        os.kill(pid, signal.SIGKILL)
    except PermissionError:  # an engine in a VM or another user's: end the server from inside instead
        engine.docker("exec", container, "python", "-c", "import os, signal; os.kill(1, signal.SIGTERM)")


def test_the_restart_policy_brings_a_crashed_backend_back(stack):
    before = stack.state("vllm-openvino")
    _crash(stack.engine, before["Id"])

    def restarted() -> bool:
        state = stack.state("vllm-openvino")
        return state["State"]["StartedAt"] != before["State"]["StartedAt"] and stack.healthy("vllm-openvino")

    wait_until(restarted, 300, interval=1, message="the backend to be restarted and healthy")
    reply = httpx.post(stack.url("LLM_PORT") + "/v1/chat/completions", timeout=120, headers=AUTH,
                       json={"model": DEFAULT_MODEL, "messages": "Hello", "max_tokens": 5, "stream": False})
    assert reply.status_code == 200, reply.text


def test_down_leaves_nothing_running(stack):
    stack.compose("down", "-v", "--remove-orphans")
    label = f"label=com.docker.compose.project={stack.project}"
    assert stack.engine.docker("ps", "-aq", "--filter", label).stdout.strip() == ""
    assert stack.engine.docker("volume", "ls", "-q", "--filter", label).stdout.strip() == ""


def test_a_failed_model_preparation_stops_the_stack_and_says_why(engine, images, tmp_path):  # noqa: ARG001
    """An LLM that cannot be prepared (here: a hub id, with no hub reachable) must not leave a half-started stack."""
    stack = Stack(engine, tmp_path)
    stack.env_file.write_text(stack.env_file.read_text().replace(
        "\nLLM_MODEL_ID=HuggingFaceTB/SmolLM2-135M-Instruct", "\nLLM_MODEL_ID=some-org/some-llm"))
    try:
        up = stack.compose("up", "-d", "--no-build", check=False, timeout=600)
        assert up.returncode != 0 and "models" in up.stdout + up.stderr, up.stdout + up.stderr
        assert "Could not fetch 'some-org/some-llm'" in stack.compose("logs", "--no-color", "models").stdout
        for service in ("vllm-openvino", "embedding"):  # the servers that wait for the models never started
            containers = stack.compose("ps", "-a", "-q", service).stdout.split()
            assert not any(json.loads(stack.engine.docker("inspect", c).stdout)[0]["State"]["Running"]
                           for c in containers), service
    finally:
        stack.compose("down", "-v", "--remove-orphans", check=False)


# --- the GPU configuration, rendered ------------------------------------------------------------------------------


def test_gpu_override_renders_the_gpu_backend(engine, tmp_path):
    shutil.copyfile(ROOT / "compose/.env.example", tmp_path / ".env")
    rendered = engine.run(*engine.compose, "--env-file", str(tmp_path / ".env"), "-f", "compose/compose.yaml",
                          "-f", "compose/compose.gpu.yaml", "config").stdout
    backend = yaml.safe_load(rendered)["services"]["vllm-openvino"]
    assert backend["image"] == "localhost/ov-genai-stack/backend-gpu:latest"
    assert backend["build"]["target"] == "backend-gpu"
    assert backend["environment"]["VLLM_OPENVINO_DEVICE"] == "GPU"
    devices = [d if isinstance(d, str) else f"{d['source']}:{d['target']}" for d in backend["devices"]]
    assert devices == ["/dev/dri:/dev/dri"]
    assert [str(g) for g in backend["group_add"]] == ["110"]


def test_compose_passes_the_proxies_as_set_where_it_runs(engine, tmp_path):
    """A variable without a value: compose gives the container the value it has where compose runs (the shell or
    .env), and leaves it unset otherwise, so that an empty http_proxy never hides an HTTP_PROXY."""
    (tmp_path / ".env").write_text("https_proxy=http://proxy.example.com:3128\nno_proxy=mirror.internal\n")
    env = {key: value for key, value in engine.env.items() if key.lower() not in ("http_proxy", "https_proxy",
                                                                                  "no_proxy")}
    rendered = subprocess.run([*engine.compose, "--env-file", str(tmp_path / ".env"), "-f", "compose/compose.yaml",
                               "config"], cwd=ROOT, env={**env, "HTTP_PROXY": "http://shell.example.com:3128"},
                              capture_output=True, text=True, timeout=120, check=True).stdout
    for name, service in yaml.safe_load(rendered)["services"].items():
        environment = service["environment"]
        assert environment["https_proxy"] == "http://proxy.example.com:3128", name
        assert environment["HTTP_PROXY"] == "http://shell.example.com:3128", name
        # unset where compose runs: not passed (compose 1.x renders it as null, which the container does not get)
        assert environment.get("http_proxy") is None and environment.get("HTTPS_PROXY") is None, name
        assert environment["no_proxy"].startswith("mirror.internal,") and "vllm-openvino" in environment["no_proxy"]


# --- the launch scripts in Docker mode ----------------------------------------------------------------------------


def launch(engine: Engine, script: str, args: list[str], name: str, port: int, health: str) -> None:
    env = {**engine.env, "CONTAINER_NAME": name}
    process = subprocess.Popen(["bash", f"scripts/{script}", "--docker", "-p", str(port), *args], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        def up() -> bool:
            assert process.poll() is None, process.stdout.read()[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}{health}", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 300, interval=0.5, message=f"{script} in Docker mode")
    except BaseException:
        engine.docker("rm", "-f", name, check=False)
        raise


def test_launch_scripts_in_docker_mode(engine, images):  # noqa: ARG001
    backend_port, llm_port = free_port(), free_port()
    names = (f"ovgenai-test-backend-{uuid.uuid4().hex[:6]}", f"ovgenai-test-llm-{uuid.uuid4().hex[:6]}")
    try:
        launch(engine, "launch_vllm_service_openvino.sh", ["-m", str(MODELS / DEFAULT_MODEL)], names[0],
               backend_port, "/health")
        launch(engine, "launch_microservice.sh", ["-e", f"http://127.0.0.1:{backend_port}", "-m",
                                                  DEFAULT_MODEL.split("/")[-1]], names[1], llm_port,
               "/v1/health_check")
        reply = httpx.post(f"http://127.0.0.1:{llm_port}/v1/chat/completions", timeout=120,
                           json={"messages": "Hello", "max_tokens": 5, "stream": False})
        assert reply.status_code == 200, reply.text
    finally:
        for name in names:
            engine.docker("rm", "-f", name, check=False)


def test_the_ovms_docker_run_line(engine, images):  # noqa: ARG001
    """`docker run -p 8000:8000 -v $(pwd)/models:/models <image> --rest_port 8000 --config_path /models/config.json`,
    as OVMS's guide types it (the image's entry point takes OVMS's flags)."""
    port, name = free_port(), f"ovgenai-test-ovms-{uuid.uuid4().hex[:6]}"
    try:
        engine.docker("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8000", "-v", f"{MODELS}:/models:ro",
                      "localhost/ov-genai-stack/backend:latest", "--rest_port", "8000", "--config_path",
                      "/models/config.json")

        def up() -> bool:
            state = json.loads(engine.docker("inspect", name).stdout)[0]["State"]
            assert state["Running"], engine.docker("logs", name, check=False).stdout[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 300, interval=0.5, message="the OVMS docker run line")
        reply = httpx.post(f"http://127.0.0.1:{port}/v3/chat/completions", timeout=120,
                           json={"model": DEFAULT_MODEL, "max_tokens": 5,
                                 "messages": [{"role": "user", "content": "Hello"}]})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] > 0, reply.text
    finally:
        engine.docker("rm", "-f", name, check=False)


def test_launch_script_with_a_hub_id_names_the_model_when_the_hub_is_unreachable(engine, images):  # noqa: ARG001
    """`-m <Hugging Face id>` exports the model in the models image first; without a reachable hub it must stop
    with the id and the network failure, before any server starts."""
    volume = f"ovgenai-test-models-{uuid.uuid4().hex[:6]}"
    env = {"MODELS_VOLUME": volume, "HF_CACHE_VOLUME": volume + "-hf", "CONTAINER_NAME": volume}
    try:
        result = engine.run("bash", "scripts/launch_vllm_service_openvino.sh", "--docker", "-p", str(free_port()),
                            "-m", "some-org/some-llm", env=env, check=False, timeout=600)
        assert result.returncode != 0
        assert "Could not fetch 'some-org/some-llm'" in result.stderr, result.stdout + result.stderr
        assert engine.docker("ps", "-aq", "--filter", f"name={volume}").stdout.strip() == ""
    finally:
        engine.docker("volume", "rm", "-f", volume, volume + "-hf", check=False)
