"""Each launch script, in native mode (this machine has no Docker engine), starts its service; in Docker mode (a
recording stand-in for `docker`) it runs this project's images with what each service needs; the build scripts
name and label the images; OPEA's guide's commands work as typed from dependency/."""

from __future__ import annotations

import os
import signal
import subprocess
import tomllib
from pathlib import Path

import httpx
import pytest

from tests.support.servers import MODELS, ROOT, free_port, wait_until

# Starts processes, servers or real pipelines: the system tier (not make test-unit).


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
# Answers the scripts' probes; records each `docker run` and `docker build`: its arguments, and the value of each
# `-e NAME` it passes on.
case "$1" in
  info) exit 0 ;;
  image) if [[ "$*" == *models-export* ]]; then exit "${EXPORT_IMAGE_MISSING:-1}"; fi; exit "${IMAGE_MISSING:-0}" ;;
  build) printf '%s\\n' "$@" >> "$RECORD" ;;
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


def docker_run(script: str, tmp_path, script_args: list[str] | None = None, folder: str = "scripts", **env: str
               ) -> tuple[list[str], dict[str, str]]:
    """What `docker run`s the script executes in Docker mode: their arguments, and the variables passed by name.
    `folder`: where it is run from, as `cd folder && bash script` (OPEA's guide runs the backend's from dependency/)."""
    record = recording_docker(tmp_path)
    passed_on = tmp_path / "run.txt.env"
    args = [a.format(tmp=tmp_path) for a in SCRIPTS[script][0]] if script_args is None else script_args
    clean = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY") and k not in ("HOST", "HOST_BIND")
             and k.lower() not in ("http_proxy", "https_proxy", "no_proxy", "allowed_origins", "render_group_id")}
    subprocess.run(["bash", script, "--docker", "-p", "18123", *args], cwd=ROOT / folder, check=True,
                   env={**clean, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RECORD": str(record), **env},
                   capture_output=True, timeout=60)
    passed = dict(line.split("=", 1) for line in passed_on.read_text().splitlines()) if passed_on.exists() else {}
    return record.read_text().splitlines(), passed


def recording_docker(tmp_path) -> Path:
    """The stand-in `docker` in tmp_path/bin, and the (emptied) file it records into."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    fake = tmp_path / "bin" / "docker"
    fake.write_text(RECORDING_DOCKER)
    fake.chmod(0o755)
    record, passed_on = tmp_path / "run.txt", tmp_path / "run.txt.env"
    record.unlink(missing_ok=True)
    passed_on.unlink(missing_ok=True)
    return record


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
    assert "localhost/ov-genai-stack/models:latest" in prepare_args
    assert prepare_args[-4:] == ["--llm", "org/m-GGUF:Q4_K_M", "--embedding", "none"]
    assert "MODEL_PATH=/models/org/m-GGUF:Q4_K_M" in args and "SERVED_MODEL_NAME=org/m-GGUF:Q4_K_M" in args
    assert passed == {"HF_TOKEN": "hf_9f3e"} and not any("hf_9f3e" in arg for arg in args)


def test_docker_mode_prepares_with_the_conversion_tools_once_their_image_is_built(tmp_path):
    """A Transformers checkpoint needs the models-export image: the scripts prepare with it where it is built, and
    with the models image (no torch) otherwise."""
    args, _ = docker_run("launch_vllm_service_openvino.sh", tmp_path, [], LLM_MODEL_ID="org/checkpoint",
                         EXPORT_IMAGE_MISSING="0")
    assert "localhost/ov-genai-stack/models-export:latest" in args[:args.index("--embedding")]
    args, _ = docker_run("launch_embedding_service.sh", tmp_path, ["-m", "org/encoder"], EXPORT_IMAGE_MISSING="0")
    assert "localhost/ov-genai-stack/models-export:latest" in args


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
    """A missing image stops the script with what to build, before anything runs, rather than a registry's error:
    every run says --pull=never (the backend's with a Hub id runs the models image first)."""
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
    images = [arg for arg in args if arg.startswith(("localhost/", "registry.example/", "opea/"))]
    assert images and all(image.startswith("registry.example/ov-genai-stack/") and image.endswith(":1.2")
                          for image in images)
    args, _ = docker_run(script, tmp_path, LLM_MODEL_ID="org/m", EMBEDDING_MODEL_ID="org/e")
    assert all(not arg.startswith("opea/") for arg in args)  # OPEA's published names only when asked for



# --- corporate networks, the GPU, OPEA's guide as typed, the build scripts --------------------------------------


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_docker_mode_passes_the_proxies_by_name(script, tmp_path):
    """A proxy URL may carry a password: passed by name like the key, never on the command line. With a proxy,
    no_proxy keeps the user's hosts and gains this machine's names (the services call each other on localhost)."""
    proxy = "http://user:pw-9f3e@proxy.example.com:3128"
    args, passed = docker_run(script, tmp_path, LLM_MODEL_ID="org/m", EMBEDDING_MODEL_ID="org/e", https_proxy=proxy,
                              HTTP_PROXY=proxy, no_proxy="mirror.internal", ALLOWED_ORIGINS="http://localhost:5173")
    assert passed["https_proxy"] == passed["HTTP_PROXY"] == proxy and "http_proxy" not in passed
    assert passed["no_proxy"] == passed["NO_PROXY"] == "mirror.internal,localhost,127.0.0.1,::1"
    assert passed["ALLOWED_ORIGINS"] == "http://localhost:5173"
    assert not any("pw-9f3e" in arg for arg in args)
    runs = [i for i, arg in enumerate(args) if arg == "run"]
    for start, end in zip(runs, [*runs[1:], len(args)], strict=True):  # every container: the models image's too
        assert ["-e", "https_proxy"] in [args[i:i + 2] for i in range(start, end)]


@pytest.mark.parametrize("folder", ["scripts", "dependency"])
def test_the_gpu_backend_gets_the_gpu_image_device_and_groups(folder, tmp_path):
    """`-d gpu`, as OPEA's guide types it (from dependency/ too): the GPU image, /dev/dri, and the groups that may
    open its render node (video, and the node's own group, whose id differs between hosts)."""
    args, _ = docker_run("launch_vllm_service_openvino.sh", tmp_path, ["-d", "gpu", "-m", str(tmp_path)],
                         folder=folder, RENDER_GROUP_ID="992")
    pairs = [args[i:i + 2] for i in range(len(args) - 1)]
    assert ["--device", "/dev/dri"] in pairs
    assert ["--group-add", "video"] in pairs and ["--group-add", "992"] in pairs
    assert "-e" in args and "VLLM_OPENVINO_DEVICE=GPU" in args
    assert args[-1] == "localhost/ov-genai-stack/backend-gpu:latest"
    cpu, _ = docker_run("launch_vllm_service_openvino.sh", tmp_path, ["-m", str(tmp_path)], folder=folder)
    assert "--device" not in cpu and "VLLM_OPENVINO_DEVICE=CPU" in cpu
    assert cpu[-1] == "localhost/ov-genai-stack/backend:latest"


@pytest.mark.skipif(Path("/dev/dri").exists(), reason="this machine has a GPU render node")
def test_the_gpu_backend_without_a_render_node_says_what_is_missing(tmp_path):
    record = recording_docker(tmp_path)
    result = subprocess.run(["bash", "scripts/launch_vllm_service_openvino.sh", "--docker", "-d", "gpu", "-m",
                             str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                                 "RECORD": str(record), "RENDER_GROUP_ID": ""})
    assert result.returncode == 2 and "no GPU render node under /dev/dri" in result.stderr
    assert not record.exists()


BUILDS = [  # (folder, script, argument) -> the Dockerfile target built
    ("scripts", "build_docker_vllm_openvino.sh", "cpu", "backend"),
    ("scripts", "build_docker_vllm_openvino.sh", "gpu", "backend-gpu"),
    ("dependency", "build_docker_vllm_openvino.sh", "gpu", "backend-gpu"),  # OPEA's guide, as typed
    ("dependency", "./build_docker_vllm_openvino.sh", "", "backend"),
    ("scripts", "build_docker_microservice.sh", "llm", "llm"),
    ("scripts", "build_docker_microservice.sh", "embedding", "embedding"),
    ("scripts", "build_docker_microservice.sh", "gateway", "gateway"),
    ("scripts", "build_docker_microservice.sh", "models", "models"),
    ("scripts", "build_docker_microservice.sh", "models-export", "models-export"),
]


@pytest.mark.parametrize(("flags", "targets"), [
    ([], ["backend", "llm", "embedding", "gateway", "models"]),  # no torch: what compose and the chart run
    (["--gpu", "--export"], ["backend", "backend-gpu", "llm", "embedding", "gateway", "models", "models-export"])])
def test_build_all_builds_the_conversion_tools_only_when_asked(flags, targets, tmp_path):
    record = recording_docker(tmp_path)
    subprocess.run(["bash", "scripts/build_docker_all.sh", *flags], cwd=ROOT, check=True, capture_output=True,
                   timeout=60, env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                                    "RECORD": str(record)})
    args = record.read_text().splitlines()
    assert [args[i + 1] for i, arg in enumerate(args) if arg == "--target"] == targets


@pytest.mark.parametrize(("folder", "script", "argument", "target"), BUILDS,
                         ids=[f"{b[0]}/{b[1].lstrip('./')}-{b[2] or 'default'}" for b in BUILDS])
def test_the_build_scripts_name_and_label_the_images(folder, script, argument, target, tmp_path):
    record = recording_docker(tmp_path)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RECORD": str(record),
           "https_proxy": "http://user:pw-9f3e@proxy.example.com:3128"}
    subprocess.run(["bash", script, *([argument] if argument else [])], cwd=ROOT / folder, env=env, check=True,
                   capture_output=True, timeout=60)
    args = record.read_text().splitlines()
    pairs = [args[i:i + 2] for i in range(len(args) - 1)]
    assert args[0] == "build" and ["--target", target] in pairs and args[-1] == str(ROOT)
    assert ["-t", f"localhost/ov-genai-stack/{target}:latest"] in pairs
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert ["--build-arg", f"VERSION={version}"] in pairs and ["--build-arg", f"REVISION={revision}"] in pairs
    assert ["--build-arg", "https_proxy"] in pairs and not any("pw-9f3e" in arg for arg in args)  # by name
    subprocess.run(["bash", script, *([argument] if argument else [])], cwd=ROOT / folder, check=True,
                   env={**env, "REGISTRY": "registry.example.com/team", "TAG": "0.1.0"}, capture_output=True)
    assert f"registry.example.com/team/ov-genai-stack/{target}:0.1.0" in record.read_text().splitlines()


def test_the_entry_points_in_dependency_are_the_scripts_own():
    """One implementation: dependency/'s scripts only hand over to scripts/ (OPEA's guide runs them from there)."""
    for entry in sorted((ROOT / "dependency").glob("*.sh")):
        text = entry.read_text()
        assert (ROOT / "scripts" / entry.name).exists(), entry.name
        assert f'exec bash "$(dirname "${{BASH_SOURCE[0]}}")/../scripts/{entry.name}" "$@"' in text, entry.name
        assert len([line for line in text.splitlines() if line and not line.startswith("#")]) == 2, entry.name
