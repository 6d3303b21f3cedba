"""What `make run` starts for the models it is given: one variable names each model, every service gets it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM
from ovgenai_services.stack.services import StackSettings, plan


def services(**env: str) -> dict:
    return {service.name: service for service in plan(StackSettings(models=Path("repo"), **env))}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("LLM_MODEL_ID", "LLM_MODEL", "EMBEDDING_MODEL_ID", "EMBEDDING_MODEL", "RERANK_MODEL_ID",
                 "LLM_DRAFT_MODEL_ID"):
        monkeypatch.delenv(name, raising=False)


def test_the_defaults():
    started = services()
    assert started["backend"].args == ["--model", f"repo/{DEFAULT_LLM}", "--served_model_name", DEFAULT_LLM]
    assert started["llm"].env["LLM_MODEL"] == started["gateway"].env["LLM_MODEL_ID"] == DEFAULT_LLM
    assert started["embedding"].env["EMBEDDING_MODEL_PATH"] == f"repo/{DEFAULT_EMBEDDING}"
    assert "RERANK_MODEL_PATH" not in started["embedding"].env
    assert "RERANK_SERVER_ENDPOINT" not in started["gateway"].env


def test_llm_model_id_from_the_environment_reaches_every_service(monkeypatch):
    """`LLM_MODEL_ID=... make run` serves that model (the stack once read only LLM_MODEL, and served the default)."""
    monkeypatch.setenv("LLM_MODEL_ID", "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M")
    started = services()
    name = "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"
    assert started["backend"].args == ["--model", f"repo/{name}", "--served_model_name", name]
    assert started["llm"].env["LLM_MODEL"] == name  # OPEA's default model name, derived from LLM_MODEL_ID
    assert started["gateway"].env["LLM_MODEL_ID"] == name
    monkeypatch.delenv("LLM_MODEL_ID")
    monkeypatch.setenv("LLM_MODEL", "Qwen/Qwen2.5-1.5B-Instruct")  # the older name still works
    assert services()["llm"].env["LLM_MODEL"] == "Qwen/Qwen2.5-1.5B-Instruct"


def test_a_local_folder_is_served_by_its_name(tmp_path):
    folder = tmp_path / "my-llm"
    folder.mkdir()
    started = services(llm_model_id=str(folder))
    assert started["backend"].args == ["--model", "repo/my-llm", "--served_model_name", "my-llm"]
    assert started["gateway"].env["LLM_MODEL_ID"] == "my-llm"


def test_llm_draft_model_id_gives_the_backend_its_draft(monkeypatch):
    assert "--draft_model" not in services()["backend"].args
    monkeypatch.setenv("LLM_DRAFT_MODEL_ID", "owner/small")
    args = services()["backend"].args
    assert args[args.index("--draft_model") + 1] == "repo/owner/small"


def test_rerank_model_id_turns_the_rerank_stage_on(monkeypatch):
    monkeypatch.setenv("EMBEDDING_MODEL_ID", "BAAI/bge-small-en-v1.5")
    monkeypatch.setenv("RERANK_MODEL_ID", "BAAI/bge-reranker-base")
    started = services(embedding_port=6123)
    assert started["embedding"].env["EMBEDDING_MODEL_PATH"] == "repo/BAAI/bge-small-en-v1.5"
    assert started["embedding"].env["RERANK_MODEL_PATH"] == "repo/BAAI/bge-reranker-base"
    assert started["gateway"].env["RERANK_SERVER_ENDPOINT"] == "http://127.0.0.1:6123"
    assert started["gateway"].env["EMBEDDING_MODEL_ID"] == "BAAI/bge-small-en-v1.5"


def test_behind_a_proxy_the_services_call_each_other_directly():
    """http_proxy without a loopback entry in no_proxy sent every call between the services to the proxy."""
    from ovgenai_services.stack.services import no_proxy_for_loopback

    services = plan(StackSettings(), {"http_proxy": "http://proxy.corp:3128", "no_proxy": "corp.example"})
    for service in services:
        assert service.env["no_proxy"] == service.env["NO_PROXY"] == "corp.example,127.0.0.1,localhost,::1"
    assert no_proxy_for_loopback({"NO_PROXY": "localhost, .svc"})["no_proxy"] == "localhost,.svc,127.0.0.1,::1"
    assert no_proxy_for_loopback({})["NO_PROXY"] == "127.0.0.1,localhost,::1"
