"""`prepare` (prepare.py) with Hub models: a pinned revision, and one changed since, prepared again (and nothing
done when nothing changed); an embedder and a reranker named by EMBEDDING_MODEL_ID and RERANK_MODEL_ID prepared and
served by the embedding service."""

from __future__ import annotations

import json

from tests.ovgenai_models.system.hub_models import prepare
from tests.support.servers import RemoteServer


def test_a_revision_is_pinned_and_a_changed_one_prepared_again(hub, made, tmp_path):
    notice = tmp_path / "NOTICE.txt"
    notice.write_text("revision v1")
    hub.add("test-org/revisions-ov", made["ir"])
    hub.add("test-org/revisions-ov", {**made["ir"], "NOTICE.txt": notice}, revision="v1")
    repository, env = tmp_path / "repo", {**hub.env(tmp_path / "hf"), "LLM_MODEL_ID": "test-org/revisions-ov"}
    folder = repository / "test-org/revisions-ov"
    pinned = prepare(repository, {**env, "LLM_MODEL_REVISION": "v1"}, "--embedding", "none",
                     without_export_tools=True)
    assert pinned.returncode == 0 and (folder / "NOTICE.txt").read_text() == "revision v1", pinned.stderr[-3000:]
    main = prepare(repository, env, "--embedding", "none", without_export_tools=True)
    assert main.returncode == 0 and not (folder / "NOTICE.txt").exists(), main.stderr[-3000:]
    unchanged = prepare(repository, env, "--embedding", "none", without_export_tools=True)
    assert "test-org/revisions-ov: already prepared" in unchanged.stdout


def test_an_embedder_and_a_reranker_from_the_hub_are_served_by_rerank_model_id(hub, made, tmp_path):
    import httpx

    hub.add("test-org/tiny-bert", made["bert"])
    hub.add("test-org/tiny-cross", made["cross"])
    repository = tmp_path / "repo"
    env = {**hub.env(tmp_path / "hf"), "EMBEDDING_MODEL_ID": "test-org/tiny-bert",
           "RERANK_MODEL_ID": "test-org/tiny-cross"}
    result = prepare(repository, env, "--llm", "none")
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads((repository / "test-org/tiny-bert" / "embedding_config.json").read_text())
    assert (info["pooling"], info["normalize"]) == ("mean", True)  # read from its own modules.json
    service_env = {"EMBEDDING_MODEL_PATH": str(repository / "test-org/tiny-bert"),
                   "RERANK_MODEL_ID": "test-org/tiny-cross", "MODEL_REPOSITORY_PATH": str(repository)}
    with RemoteServer("ovgenai_services.embedding", env=service_env) as server:
        body = {"query": "quick fox", "documents": ["the quick brown fox", "paris"], "top_n": 1}
        ranked = httpx.post(server.url + "/v1/rerank", json=body, timeout=60)
        assert ranked.status_code == 200 and len(ranked.json()["results"]) == 1, ranked.text
