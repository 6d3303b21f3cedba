"""Models at runtime on the real backend: its repository edited while a stream runs. The stream finishes on the
model removed under it; the new model answers; the removed one is a 404; a broken one is FAILED with its reason in
/v1/config and /v1/models while the rest serve; POST /v1/config/reload applies a change at once."""

from __future__ import annotations

import json
import os
import shutil

import httpx
import pytest

from tests.support.servers import MODELS, RemoteServer, wait_until

STORY = [{"role": "user", "content": "Tell me a very long story about a dragon."}]


def add_model(repository, source, name: str, broken: bool = False) -> None:
    """`name` in the repository: the default model's IR hard-linked (or its files' names holding junk)."""
    folder = repository / name / "ir"
    folder.mkdir(parents=True)
    for item in source.glob("openvino_*"):
        if broken:
            (folder / item.name).write_text("not a model")
        elif os.stat(item).st_dev == os.stat(repository).st_dev:
            os.link(item, folder / item.name)
        else:
            shutil.copy(item, folder)
    graph = (source / "graph.pbtxt").read_text().replace('models_path: "./"', 'models_path: "./ir"')
    (repository / name / "graph.pbtxt").write_text(graph)


def write_config(repository, *names: str) -> None:
    entries = [{"name": name, "base_path": name} for name in names]
    (repository / "config.json").write_text(json.dumps({"mediapipe_config_list": entries}))


def states(url: str) -> dict[str, tuple[str, str]]:
    config = httpx.get(url + "/v1/config", timeout=10).json()
    return {name: (entry["model_version_status"][0]["state"], entry["model_version_status"][0]["status"][
        "error_message"]) for name, entry in config.items()}


@pytest.fixture
def repository(default_model, tmp_path):
    source = MODELS / default_model
    for name in ("alpha", "beta", "gamma"):
        add_model(tmp_path, source, name)
    add_model(tmp_path, source, "broken", broken=True)
    write_config(tmp_path, "alpha")
    return tmp_path


def test_a_repository_edited_while_a_stream_runs(repository):
    args = ["--model", str(repository / "config.json"), "--file_system_poll_wait_seconds", "0.2"]
    with RemoteServer("ovgenai_server", args) as server, httpx.Client(timeout=120) as http:
        body = {"model": "alpha", "messages": STORY, "max_tokens": 120, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        with http.stream("POST", server.url + "/v1/chat/completions", json=body) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("data: ")  # alpha is answering
            write_config(repository, "beta", "broken")  # alpha removed, beta and a broken model added
            wait_until(lambda: states(server.url).get("beta", ("",))[0] == "AVAILABLE", 120, 0.2, "beta loaded")
            rest = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
        assert rest[-1]["usage"]["completion_tokens"] == 120  # the stream finished on the model removed under it
        answer = http.post(server.url + "/v1/chat/completions",
                           json={"model": "beta", "messages": STORY, "max_tokens": 3})
        assert answer.status_code == 200 and answer.json()["model"] == "beta"
        gone = http.post(server.url + "/v1/chat/completions", json={"model": "alpha", "messages": STORY})
        assert gone.status_code == 404
        wait_until(lambda: states(server.url).get("broken", ("",))[0] == "FAILED", 60, 0.2, "broken failed")
        state, reason = states(server.url)["broken"]
        assert reason.startswith("cannot load")
        refused = http.post(server.url + "/v1/chat/completions", json={"model": "broken", "messages": STORY})
        assert refused.status_code == 503 and reason in refused.json()["error"]["message"]
        listed = {m["id"]: m["status"]["value"] for m in http.get(server.url + "/v1/models").json()["data"]}
        assert listed == {"beta": "AVAILABLE", "broken": "FAILED"}
        assert http.get(server.url + "/health").status_code == 200  # the served models are ready

        write_config(repository, "beta", "gamma")
        reloaded = http.post(server.url + "/v1/config/reload")  # at once, answered once gamma has loaded
        assert reloaded.status_code in (200, 201)  # 200 when the watch saw the change first
        assert reloaded.json()["gamma"]["model_version_status"][0]["state"] == "AVAILABLE"
        assert http.post(server.url + "/v1/chat/completions",
                         json={"model": "gamma", "messages": STORY, "max_tokens": 2}).status_code == 200
        assert "broken" not in states(server.url)
