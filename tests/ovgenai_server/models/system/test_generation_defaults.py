"""A model's generation_config.json is the default of every request that sets no sampling field: a folder whose
config says top_k 1 answers every seed alike, the same folder with GENERATION_CONFIG=none samples over the whole
vocabulary; /v1/models says what applies."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.servers import MODELS, RemoteServer

SEEDS = range(1, 7)


@pytest.fixture(scope="module")
def greedy_folder(default_model, tmp_path_factory):
    """The default model's files, with a generation_config.json of top_k 1."""
    folder = tmp_path_factory.mktemp("greedy-model")
    for path in (MODELS / default_model).iterdir():
        if path.name != "generation_config.json":
            (folder / path.name).symlink_to(path)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 2, "top_k": 1}))
    return folder


def answers(server: RemoteServer) -> set[str]:
    texts = set()
    for seed in SEEDS:  # no sampling field but the seed: the model's defaults decide the distribution
        reply = httpx.post(server.url + "/v1/completions", timeout=120, json={
            "model": "m", "prompt": "The weather today is", "max_tokens": 12, "seed": seed})
        assert reply.status_code == 200, reply.text
        texts.add(reply.json()["choices"][0]["text"])
    return texts


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_the_models_own_defaults_decide_how_an_unset_request_samples(greedy_folder, choice):
    args = ["--model_path", str(greedy_folder), "--served_model_name", "m", "--generation-config", choice]
    with RemoteServer("ovgenai_server", args) as server:
        card = httpx.get(server.url + "/v1/models/m", timeout=10).json()
        texts = answers(server)
    if choice == "auto":
        assert card["generation_config"] == {"top_k": 1} and len(texts) == 1  # the likeliest token, every seed
    else:
        assert card["generation_config"] == {} and len(texts) > 1  # temperature 1 over every token
