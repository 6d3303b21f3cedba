"""`prepare --serve_only`, as compose's models service and the chart's upgrade Job run it, against a repository a
real backend serves (as compose's and the chart's backends serve theirs): the backend swaps to the newly prepared
LLM while it runs, the one it replaced is a 404, and no restart is needed."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir
from ovgenai_models.repository import register
from tests.support.servers import MODELS, ROOT, RemoteServer, wait_until

QUESTION = [{"role": "user", "content": "Name a color."}]


def served(url: str) -> dict[str, str]:
    """Each model's state, as /v1/config (OVMS's model status) gives it."""
    config = httpx.get(url + "/v1/config", timeout=10).json()
    return {name: entry["model_version_status"][0]["state"] for name, entry in config.items()}


def test_a_model_prepared_with_serve_only_replaces_the_served_one(default_model, tmp_path):
    repository = tmp_path / "models"
    (repository / "old").mkdir(parents=True)
    for item in (MODELS / default_model).iterdir():  # the default model under another name, hard-linked
        os.link(item, repository / "old" / item.name)
    register(repository / "config.json", "old", "old", llm=True)
    gguf = package_dir(LLM_PACKAGE) / LLM_FILE  # a local .gguf: prepared offline, served under its file's stem
    new = gguf.stem
    args = ["--model", str(repository), "--file_system_poll_wait_seconds", "0.2"]
    with RemoteServer("ovgenai_server", args) as server:
        assert served(server.url) == {"old": "AVAILABLE"}
        done = subprocess.run([sys.executable, "-m", "ovgenai_models", "prepare", "--model_repository_path",
                               str(repository), "--llm", str(gguf), "--embedding", "none", "--serve_only"],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{new}: the LLM the repository serves" in done.stdout
        wait_until(lambda: served(server.url) == {new: "AVAILABLE"}, 120, interval=0.2,
                   message=f"{new} alone to be served")
        body = {"model": new, "messages": QUESTION, "max_tokens": 8}
        reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
        gone = httpx.post(server.url + "/v1/chat/completions", json={**body, "model": "old"}, timeout=60)
        assert gone.status_code == 404 and gone.json()["error"]["param"] == "model"
    assert (repository / "old" / "openvino_model.xml").is_file()  # kept for a switch back
