"""KV-cache eviction on the real engine: a context longer than the KV cache completes with eviction on and is
refused with it off.

One backend serves the default model twice from a repository, both with a KV cache of 16 blocks (512 tokens): one
entry as OVMS writes eviction into its graph.pbtxt, the other without. Each is asked for a ~300-token prompt and 300
new tokens (600 tokens of context)."""

from __future__ import annotations

import httpx
import pytest

from ovgenai_models.repository import graph_pbtxt, register
from tests.support.servers import MODELS, RemoteServer

EVICTION = {"start_size": 32, "recent_size": 96, "max_cache_size": 256}
PROMPT = " ".join(f"item {i} is stored on shelf {i % 7}." for i in range(40))


@pytest.fixture(scope="module")
def server(tmp_path_factory, default_model):
    repository = tmp_path_factory.mktemp("eviction")
    for name, options in (("evicting", {"cache_eviction_config": EVICTION}), ("plain", {})):
        folder = repository / name
        folder.mkdir()
        for path in (MODELS / default_model).iterdir():
            if path.name.startswith("openvino_"):
                (folder / path.name).symlink_to(path)
        (folder / "graph.pbtxt").write_text(graph_pbtxt({"models_path": "./", "enable_prefix_caching": False,
                                                         **options}))
        register(repository / "config.json", name, name, llm=True)
    # cache_size below 1 GB is counted in blocks: 0.0016 GB is 16 blocks of 32 tokens.
    with RemoteServer("ovgenai_server", ["--model", str(repository), "--cache_size", "0.0016"]) as running:
        yield running


def complete(server, model: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v3/completions", timeout=300, json={
        "model": model, "prompt": PROMPT, "max_tokens": 300, "ignore_eos": True, "temperature": 0})


def test_a_context_past_the_cache_completes_with_eviction(server):
    reply = complete(server, "evicting")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] > 512  # more than the cache holds
    assert body["usage"]["completion_tokens"] == 300 and body["choices"][0]["finish_reason"] == "length"


def test_without_eviction_it_is_refused_and_the_model_stays_up(server):
    """Refused before it runs, saying what fits (request/sampling.py): it cannot fit the 512-token cache."""
    reply = complete(server, "plain")
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert "more KV cache than the server holds (512 tokens" in error["message"] and error["param"] == "max_tokens"
    short = httpx.post(f"{server.url}/v3/completions", timeout=120,
                       json={"model": "plain", "prompt": "Hello", "max_tokens": 4})
    assert short.status_code == 200, short.text
