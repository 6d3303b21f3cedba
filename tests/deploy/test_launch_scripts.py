"""Each launch script, in native mode (this machine has no Docker engine), starts its service."""

from __future__ import annotations

import os
import signal
import subprocess

import httpx
import pytest

from tests.support.servers import MODELS, ROOT, free_port, wait_until

# Starts processes, servers or real pipelines: the system tier (not make test-unit).
pytestmark = pytest.mark.system


def launch(script: str, args: list[str], env: dict[str, str], health: str, first_line_says: str) -> None:
    port = free_port()
    log = ROOT / ".cache" / f"{script}.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(["bash", f"scripts/{script}", "-p", str(port), *args], cwd=ROOT,
                                   env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        def up() -> bool:
            assert process.poll() is None, log.read_text()[-2000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}{health}", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 180, interval=0.25, message=script)
        first = log.read_text().splitlines()[0]
        assert first_line_says in first and "(native" in first
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)


@pytest.mark.usefixtures("default_model")
def test_backend_script_native():
    launch("launch_vllm_service_openvino.sh", ["--native", "-m", str(MODELS)], {}, "/health", "backend")


def test_llm_script_native(backend, default_model):
    launch("launch_microservice.sh", ["--native", "-e", backend.url, "-m", default_model], {}, "/v1/health_check",
           "LLM microservice")


def test_embedding_script_native():
    launch("launch_embedding_service.sh", ["--native", "-m", str(MODELS / "sentence-transformers/all-MiniLM-L6-v2")],
           {}, "/v1/health_check", "embedding")


def test_gateway_script_native(embedding_service, llm_service, tmp_path):
    launch("launch_gateway.sh", ["--native", "-l", llm_service.url, "-e", embedding_service.url, "-d",
                                 str(tmp_path)], {}, "/v1/health_check", "gateway")


# --- Docker mode, as the scripts call `docker` (a recording stand-in: no engine here) ---------------------------

RECORDING_DOCKER = """#!/usr/bin/env bash
# Answers the scripts' probes; records each `docker run`: its arguments, and the value of each `-e NAME` it passes on.
case "$1" in
  info) exit 0 ;;
  image) exit "${IMAGE_MISSING:-0}" ;;
  run)
    printf '%s\\n' "$@" >> "$RECORD"
    prev=""
    for arg in "$@"; do
      if [[ "$prev" == -e && "$arg" != *=* ]]; then printf '%s=%s\\n' "$arg" "${!arg}" >> "$RECORD.env"; fi
      prev="$arg"
    done ;;
esac
"""
SCRIPTS = {  # script -> (its arguments, the keys it must pass on)
    "launch_vllm_service_openvino.sh": (["-m", "{tmp}"], ["SERVICE_API_KEY"]),
    "launch_embedding_service.sh": (["-m", "{tmp}"], ["SERVICE_API_KEY"]),
    "launch_microservice.sh": ([], ["SERVICE_API_KEY", "OPENAI_API_KEY"]),
    "launch_gateway.sh": (["-d", "{tmp}/data"], ["SERVICE_API_KEY", "LLM_API_KEY", "EMBEDDING_API_KEY",
                                                 "RERANK_API_KEY"]),
}


def docker_run(script: str, tmp_path, script_args: list[str] | None = None, **env: str
               ) -> tuple[list[str], dict[str, str]]:
    """What `docker run`s the script executes in Docker mode: their arguments, and the variables passed by name."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    fake = tmp_path / "bin" / "docker"
    fake.write_text(RECORDING_DOCKER)
    fake.chmod(0o755)
    record, passed_on = tmp_path / "run.txt", tmp_path / "run.txt.env"
    record.unlink(missing_ok=True)
    passed_on.unlink(missing_ok=True)
    args = [a.format(tmp=tmp_path) for a in SCRIPTS[script][0]] if script_args is None else script_args
    clean = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY") and k not in ("HOST", "HOST_BIND")}
    subprocess.run(["bash", f"scripts/{script}", "--docker", "-p", "18123", *args], cwd=ROOT, check=True,
                   env={**clean, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RECORD": str(record), **env},
                   capture_output=True, timeout=60)
    passed = dict(line.split("=", 1) for line in passed_on.read_text().splitlines()) if passed_on.exists() else {}
    return record.read_text().splitlines(), passed


def listens_on(args: list[str]) -> str:
    """The address a container is reachable at: its published port's address, or HOST on the host's network."""
    if "--network" in args:
        return next(a.split("=", 1)[1] for a in args if a.startswith("HOST="))
    return args[args.index("-p") + 1].rsplit(":", 2)[0]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_docker_mode_serves_this_machine_only_unless_host_bind_says_otherwise(script, tmp_path):
    args, _ = docker_run(script, tmp_path)
    assert listens_on(args) == "127.0.0.1"
    args, _ = docker_run(script, tmp_path, HOST_BIND="0.0.0.0")
    assert listens_on(args) == "0.0.0.0"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_docker_mode_passes_api_key_under_every_name_and_never_on_the_command_line(script, tmp_path):
    args, passed = docker_run(script, tmp_path, API_KEY="k-9f3e")
    assert passed == dict.fromkeys(SCRIPTS[script][1], "k-9f3e")
    assert not any("k-9f3e" in arg for arg in args)  # `ps` would show it
    args, passed = docker_run(script, tmp_path)
    assert not passed and not any("API_KEY" in arg for arg in args)


def test_docker_mode_prepares_a_hub_id_then_serves_it_alone_under_its_id(tmp_path):
    """LLM_MODEL_ID, as everywhere: the models image prepares it into the volume (the token passed by name, never
    on a command line), then the backend serves that model under the id the other services ask for."""
    args, passed = docker_run("launch_vllm_service_openvino.sh", tmp_path, [], LLM_MODEL_ID="org/m-GGUF:Q4_K_M",
                              GGUF_FILENAME="", HF_TOKEN="hf_9f3e")
    prepare_args = args[:args.index("--embedding") + 2]
    assert "opea/models:latest" in prepare_args and prepare_args[-4:] == ["--llm", "org/m-GGUF:Q4_K_M",
                                                                        "--embedding", "none"]
    assert "MODEL_PATH=/models/org/m-GGUF:Q4_K_M" in args and "SERVED_MODEL_NAME=org/m-GGUF:Q4_K_M" in args
    assert passed == {"HF_TOKEN": "hf_9f3e"} and not any("hf_9f3e" in arg for arg in args)


def test_the_other_scripts_ask_for_and_serve_the_models_the_variables_name(tmp_path):
    args, _ = docker_run("launch_microservice.sh", tmp_path, LLM_MODEL_ID="org/m-GGUF:Q4_K_M")
    assert "LLM_MODEL=org/m-GGUF:Q4_K_M" in args
    args, _ = docker_run("launch_microservice.sh", tmp_path, LLM_MODEL_ID="org/m", LLM_MODEL="opea-name")
    assert "LLM_MODEL=opea-name" in args  # OPEA's own variable still wins
    args, passed = docker_run("launch_embedding_service.sh", tmp_path, [], EMBEDDING_MODEL_ID="org/embedder",
                              RERANK_MODEL_ID="org/reranker")
    assert args[args.index("--llm"):args.index("--llm") + 6] == ["--llm", "none", "--embedding", "org/embedder",
                                                                 "--rerank", "org/reranker"]
    assert "EMBEDDING_MODEL_PATH=/models/org/embedder" in args and "RERANK_MODEL_PATH=/models/org/reranker" in args
    args, passed = docker_run("launch_gateway.sh", tmp_path, LLM_MODEL_ID="org/m", RERANK_MODEL_ID="org/reranker")
    assert passed["LLM_MODEL_ID"] == "org/m" and passed["RERANK_MODEL_ID"] == "org/reranker"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_docker_mode_never_pulls_an_image(script, tmp_path):
    """OPEA publishes other images under the same opea/ names: a `docker run` that pulled a missing image would start
    one of those. Every run says --pull=never (the backend's with a Hub id runs the models image first), and a missing
    image stops the script with what to build, before anything runs."""
    args, _ = docker_run(script, tmp_path, LLM_MODEL_ID="org/m", EMBEDDING_MODEL_ID="org/e")
    runs = [i for i, arg in enumerate(args) if arg == "run"]
    assert runs and all(args[i + 1] == "--pull=never" for i in runs)
    (tmp_path / "run.txt").unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RECORD": str(tmp_path / "run.txt"),
           "IMAGE_MISSING": "1"}
    result = subprocess.run(["bash", f"scripts/{script}", "--docker", "-p", "18123"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env=env)
    assert result.returncode == 2 and "build it with scripts/build_docker_all.sh" in result.stderr
    assert not (tmp_path / "run.txt").exists()


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_docker_mode_runs_the_image_the_build_scripts_name(script, tmp_path):
    """REGISTRY and TAG name the images here as in the build scripts and compose: an image built as
    registry.example/llm:1.2 is the one run, and the models image that prepares a Hub id too."""
    args, _ = docker_run(script, tmp_path, REGISTRY="registry.example", TAG="1.2", LLM_MODEL_ID="org/m",
                         EMBEDDING_MODEL_ID="org/e")
    images = [arg for arg in args if arg.startswith(("opea/", "registry.example/"))]
    assert images and all(image.startswith("registry.example/") and image.endswith(":1.2") for image in images)
