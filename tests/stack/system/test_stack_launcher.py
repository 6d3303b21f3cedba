"""The one-command native stack: up, a dying service, Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import httpx
import pytest

from tests.support.servers import MODELS, ROOT, free_port, wait_until


def start_stack(tmp_path, env: dict[str, str] | None = None, models=MODELS
                ) -> tuple[subprocess.Popen, dict[str, int], object]:
    ports = {name: free_port() for name in ("backend", "embedding", "llm", "gateway")}
    log = open(tmp_path / "stack.log", "wb")  # noqa: SIM115 - closed by the caller
    args = [sys.executable, "-m", "ovgenai_services.stack", "up", "--models", str(models), "--data", str(tmp_path),
            *[x for name, port in ports.items() for x in (f"--{name}_port", str(port))]]
    # Started with SIGINT ignored, as a script's background job inherits it: Ctrl-C must stop the stack anyway.
    clean = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY") and k != "HOST"}
    process = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**clean, **(env or {})},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    return process, ports, log


def wait_for_line(tmp_path, process, text: str, timeout: float = 240) -> None:
    def seen() -> bool:
        if process.poll() is not None:
            raise AssertionError((tmp_path / "stack.log").read_text()[-3000:])
        return text in (tmp_path / "stack.log").read_text(errors="replace")

    wait_until(seen, timeout, interval=0.25, message=text)


def service_pids(root: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        pid, ppid, *_ = line.split(None, 2)
        children.setdefault(int(ppid), []).append(int(pid))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@pytest.mark.usefixtures("default_model")
def test_up_healthy_with_one_key_then_ctrl_c_leaves_nothing(tmp_path):
    """API_KEY: every service requires it and sends it to the next, so a question crosses all four with it."""
    process, ports, log = start_stack(tmp_path, {"API_KEY": "stack-key"})
    try:
        wait_for_line(tmp_path, process, "all services are healthy")
        for name, port in ports.items():
            assert httpx.get(f"http://127.0.0.1:{port}/v1/health_check", timeout=10).status_code == 200, name
            assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code == 401, name
        gateway = f"http://127.0.0.1:{ports['gateway']}"
        page = httpx.get(gateway + "/")
        assert page.status_code == 200 and "ChatQnA" in page.text
        question = {"messages": "What is OpenVINO?", "max_tokens": 8, "stream": False}
        assert httpx.post(gateway + "/v1/chatqna", json=question, timeout=120).status_code == 401
        answer = httpx.post(gateway + "/v1/chatqna", json=question, timeout=300,
                            headers={"Authorization": "Bearer stack-key"})
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"], answer.text
        text = (tmp_path / "stack.log").read_text()
        assert "backend  | " in text and "gateway  | " in text and f"http://localhost:{ports['gateway']}/" in text
        assert "every route but the probes needs the API key" in text and "without an API key" not in text
        descendants = service_pids(process.pid)
        assert len(descendants) >= 4
        ctrl_c_stops_everything(process, descendants)
    finally:
        stop_everything(process)
        log.close()


@pytest.mark.usefixtures("default_model")
def test_a_dying_service_is_restarted_then_ctrl_c_stops_all(tmp_path):
    process, ports, log = start_stack(tmp_path)
    try:
        wait_for_line(tmp_path, process, "all services are healthy")
        out = subprocess.run(["pgrep", "-f", "ovgenai_services.embedding"], capture_output=True, text=True).stdout
        embedding = [int(p) for p in out.split() if int(p) in service_pids(process.pid)]
        os.kill(embedding[0], signal.SIGKILL)
        wait_for_line(tmp_path, process, "embedding is healthy again")
        text = (tmp_path / "stack.log").read_text()
        assert "embedding exited with code -9; its last lines:" in text and "restarting embedding in 1s" in text
        response = httpx.post(f"http://127.0.0.1:{ports['embedding']}/v1/embeddings", json={"input": "hi"})
        assert response.status_code == 200
        descendants = service_pids(process.pid)
        assert embedding[0] not in descendants and len(descendants) >= 4
        ctrl_c_stops_everything(process, descendants)
    finally:
        stop_everything(process)
        log.close()


def test_a_model_id_that_names_nothing_stops_the_stack_before_anything_starts(tmp_path):
    """LLM_MODEL_ID is what `make run` serves: one that names nothing is an error, not the default served instead."""
    process, _, log = start_stack(tmp_path, {"LLM_MODEL_ID": str(tmp_path / "no-such-model")},
                                  models=tmp_path / "models")
    try:
        assert process.wait(120) == 2
        text = (tmp_path / "stack.log").read_text()
        assert "cannot prepare the models" in text and "no-such-model' does not exist" in text, text[-2000:]
        assert "starting backend" not in text
    finally:
        stop_everything(process)
        log.close()


@pytest.mark.usefixtures("default_model")
def test_llm_model_id_is_prepared_and_served_alone_and_every_service_asks_for_it(tmp_path):
    """A local .gguf file as LLM_MODEL_ID: prepared into the stack's repository, served under its name, the LLM
    microservice's default model and the gateway's."""
    from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir

    repository = tmp_path / "models"
    env = {"LLM_MODEL_ID": str(package_dir(LLM_PACKAGE) / LLM_FILE),
           "EMBEDDING_MODEL_ID": str(MODELS / "sentence-transformers/all-MiniLM-L6-v2")}  # an IR folder: copied
    process, ports, log = start_stack(tmp_path, env, models=repository)
    try:
        wait_for_line(tmp_path, process, "all services are healthy", timeout=420)
        served = httpx.get(f"http://127.0.0.1:{ports['backend']}/v1/models", timeout=10).json()["data"]
        assert [model["id"] for model in served] == ["SmolLM2-135M-Instruct.Q4_1"]
        assert (repository / "SmolLM2-135M-Instruct.Q4_1" / "openvino_model.xml").is_file()
        reply = httpx.post(f"http://127.0.0.1:{ports['llm']}/v1/chat/completions", timeout=120,  # names no model
                           json={"messages": "Say hello.", "max_tokens": 5, "stream": False})
        assert reply.status_code == 200 and reply.json()["model"] == "SmolLM2-135M-Instruct.Q4_1", reply.text
        answer = httpx.post(f"http://127.0.0.1:{ports['gateway']}/v1/chatqna", timeout=300,
                            json={"messages": "What is OpenVINO?", "max_tokens": 8, "stream": False})
        assert answer.status_code == 200, answer.text
        ctrl_c_stops_everything(process, service_pids(process.pid))
    finally:
        stop_everything(process)
        log.close()


def ctrl_c_stops_everything(process: subprocess.Popen, descendants: list[int]) -> None:
    """Ctrl-C: the launcher exits 0 and every service process it started is gone."""
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 0
    wait_until(lambda: not [pid for pid in descendants if _alive(pid)], 10, message="no process left")


def stop_everything(process: subprocess.Popen) -> None:
    """After a failed test too: the services run in sessions of their own, so killing the launcher alone would
    leave them running."""
    left = service_pids(process.pid)
    if process.poll() is None:
        process.kill()
        process.wait()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False
