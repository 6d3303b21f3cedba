"""The gateway's documented settings, each shown to take effect: CHUNK_SIZE and CHUNK_OVERLAP, TOP_K,
PROMPT_TEMPLATE, HISTORY=condense, the API key; dataprep's POST listing and delete "all"; and an ingest that the
embedding service fails partway through storing nothing.

One gateway carries all the settings. Its embedding service refuses inputs over 128 tokens (TRUNCATION=reject), which
is how a real service fails one batch of an ingest after accepting the ones before it. What the gateway sent to the
LLM is read back from the backend: the token count of the prompt it answered, compared with the backend's count of
the messages the settings call for (token counts are exact on every CPU, where words are not)."""

from __future__ import annotations

import httpx
import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from ovgenai_services.gateway.rag import CONDENSE_PROMPT
from ovgenai_services.gateway.settings import DEFAULT_PROMPT
from tests.conftest import gateway_env
from tests.gateway.facts import documents
from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import MODELS, RemoteServer

KEY = "gateway-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHUNK_SIZE, CHUNK_OVERLAP, TOP_K = 200, 50, 2
TEMPLATE = "Use only these notes to answer.\n<notes>\n{context}\n</notes>\nEnd of notes."
MAX_INPUT_TOKENS = 128


@pytest.fixture(scope="module")
def strict_embedding():
    env = {"EMBEDDING_MODEL_PATH": str(MODELS / "sentence-transformers/all-MiniLM-L6-v2"),
           "MAX_INPUT_TOKENS": str(MAX_INPUT_TOKENS), "TRUNCATION": "reject"}
    with RemoteServer("ovgenai_services.embedding", env=env) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(strict_embedding, llm_service, tmp_path_factory):
    env = gateway_env(strict_embedding.url, llm_service.url, tmp_path_factory.mktemp("gateway-settings"),
                      CHUNK_SIZE=str(CHUNK_SIZE), CHUNK_OVERLAP=str(CHUNK_OVERLAP), TOP_K=str(TOP_K),
                      PROMPT_TEMPLATE=TEMPLATE, HISTORY="condense", EMBED_BATCH_SIZE="1", SERVICE_API_KEY=KEY)
    with RemoteServer("ovgenai_services.gateway", env=env) as server:
        files = [("files", (name, body.encode(), "text/plain")) for name, body in documents().items()]
        response = httpx.post(server.url + "/v1/dataprep/ingest", files=files, headers=AUTH, timeout=300)
        assert response.status_code == 200, response.text
        yield server


def call(gateway, path: str, **kwargs) -> httpx.Response:
    return httpx.post(gateway.url + path, headers=AUTH, timeout=120, **kwargs)


def listed(gateway) -> dict[str, int]:
    return {d["name"]: d["chunks"] for d in httpx.get(gateway.url + "/v1/dataprep/get", headers=AUTH).json()}


def context_of(sources: list[dict]) -> str:
    return "\n\n".join(f"[{s['document']}] {s['text']}" for s in sources)


def prompt_tokens(backend, default_model, messages: list[dict]) -> int:
    """The backend's own count of these messages' prompt."""
    body = {"model": default_model, "messages": messages, "max_tokens": 1}
    response = httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["usage"]["prompt_tokens"]


def test_api_key_protects_the_gateway(gateway):
    denied = httpx.post(gateway.url + "/v1/retrieve", json={"query": "Brassmoor railway"})
    assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(gateway.url + "/v1/dataprep/get").status_code == 401
    for path in ("/health", "/v1/health_check", "/live", "/", "/static/app.js"):  # probes, and the chat page
        assert httpx.get(gateway.url + path).status_code == 200, path
    for path in ("/metrics", "/openapi.json", "/docs"):
        assert httpx.get(gateway.url + path).status_code == 401, path


def test_chunk_size_and_overlap_shape_the_chunks(gateway):
    text = " ".join(f"Marker sentence {i} of the canal survey lists lock number {i * 7}." for i in range(16))
    response = call(gateway, "/v1/dataprep/ingest", data={"text": [text], "name": ["survey.txt"]})
    assert response.status_code == 200, response.text
    expected = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP).split_text(text)
    assert len(expected) > 4 and listed(gateway)["survey.txt"] == len(expected)
    for index, chunk in enumerate(expected):
        assert len(chunk) <= CHUNK_SIZE
        if index:  # neighbours overlap: each chunk starts with the end of the previous one, at most 50 characters
            words = chunk.split()
            shared = max(len(" ".join(words[:n])) for n in range(len(words) + 1)
                         if expected[index - 1].endswith(" ".join(words[:n])))
            assert 0 < shared <= CHUNK_OVERLAP
        [top] = call(gateway, "/v1/retrieve", json={"query": chunk, "k": 1}).json()["sources"]
        assert (top["document"], top["chunk"], top["text"]) == ("survey.txt", index, chunk)


def test_top_k_is_the_default_number_of_sources(gateway):
    assert len(call(gateway, "/v1/retrieve", json={"query": "Brassmoor railway"}).json()["sources"]) == TOP_K
    reply = call(gateway, "/v1/chat/completions", json={"messages": "How many stations has the Brassmoor railway?",
                                                        "max_tokens": 5})
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["sources"]) == TOP_K
    assert len(call(gateway, "/v1/retrieve", json={"query": "Brassmoor", "k": 3}).json()["sources"]) == 3


def test_prompt_template_is_the_system_prompt(gateway, backend, default_model):
    question = "How tall is Mount Eskarra?"
    reply = call(gateway, "/v1/chat/completions", json={"messages": question, "max_tokens": 5}).json()
    context = context_of(reply["sources"])
    ours = [{"role": "system", "content": TEMPLATE.replace("{context}", context)},
            {"role": "user", "content": question}]
    default = [{"role": "system", "content": DEFAULT_PROMPT.replace("{context}", context)}, ours[1]]
    expected = prompt_tokens(backend, default_model, ours)
    assert expected != prompt_tokens(backend, default_model, default)
    assert reply["usage"]["prompt_tokens"] == expected


def test_history_condense_rewrites_the_question_and_drops_the_turns(gateway, backend, default_model):
    turns = [
        {"role": "user", "content": "Who wrote the book Patterns of Tide?"},
        {"role": "assistant", "content": "Professor Lin Haoran wrote it."},
        {"role": "user", "content": "What else is known about that author?"},
    ]
    generated = metric(backend.url, "ovgenai:request_success_total")
    reply = call(gateway, "/v1/chat/completions", json={"messages": turns, "max_tokens": 8}).json()
    # Two generations: the rewrite, then the answer.
    assert metric(backend.url, "ovgenai:request_success_total") - generated == 2
    # The rewrite is what the LLM makes of the condense prompt (greedy, as the gateway asks for it) ...
    history = "\n".join(f"{t['role']}: {t['content']}" for t in turns[:-1])
    condense = CONDENSE_PROMPT.format(history=history, question=turns[-1]["content"])
    rewrite = httpx.post(backend.url + "/v1/chat/completions", timeout=60, json={
        "model": default_model, "messages": [{"role": "user", "content": condense}], "max_tokens": 64,
        "temperature": 0}).json()["choices"][0]["message"]["content"].strip() or turns[-1]["content"]
    # ... and retrieval searched with it, not with the last question.
    assert reply["sources"] == call(gateway, "/v1/retrieve", json={"query": rewrite}).json()["sources"]
    # The answer's prompt holds the system prompt and the last question only: the turns were condensed away.
    answered = [{"role": "system", "content": TEMPLATE.replace("{context}", context_of(reply["sources"]))},
                turns[-1]]
    assert reply["usage"]["prompt_tokens"] == prompt_tokens(backend, default_model, answered)


def test_an_ingest_failing_partway_stores_nothing_of_it(gateway):
    # Two chunks: a sentence, then 198 characters that are one token each (200 tokens with the markers), which
    # the embedding service refuses. Chunks are embedded one call at a time (EMBED_BATCH_SIZE=1), so the first is
    # stored before the second fails.
    short = "The Brindle tower has 212 steps."
    failing = short + "\n\n" + "7," * 99
    assert len(RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
               .split_text(failing)) == 2
    before = listed(gateway)
    response = call(gateway, "/v1/dataprep/ingest", data={"text": [failing], "name": ["tower.txt"]})
    assert response.status_code == 400 and "embedding service" in response.json()["error"]["message"], response.text
    assert listed(gateway) == before
    sources = call(gateway, "/v1/retrieve", json={"query": short, "k": 50}).json()["sources"]
    assert all(s["document"] != "tower.txt" for s in sources)

    # A re-ingest that fails keeps the version stored before it.
    first = call(gateway, "/v1/dataprep/ingest", data={"text": [short], "name": ["tower.txt"]})
    assert first.json()["documents"] == [{"name": "tower.txt", "chunks": 1, "status": "ingested"}]
    response = call(gateway, "/v1/dataprep/ingest", data={"text": [failing], "name": ["tower.txt"]})
    assert response.status_code == 400
    assert listed(gateway) == {**before, "tower.txt": 1}
    [top] = call(gateway, "/v1/retrieve", json={"query": short, "k": 1}).json()["sources"]
    assert (top["document"], top["text"]) == ("tower.txt", short)


def test_dataprep_get_by_post_and_delete_all(gateway):
    documents_by_get = httpx.get(gateway.url + "/v1/dataprep/get", headers=AUTH).json()
    assert call(gateway, "/v1/dataprep/get").json() == documents_by_get  # OPEA's clients POST
    assert {"almanac.txt", "notes.md", "almanac.html"} <= {d["name"] for d in documents_by_get}
    deleted = call(gateway, "/v1/dataprep/delete", json={"file_path": "all"}).json()
    assert deleted == {"status": True, "deleted_chunks": sum(d["chunks"] for d in documents_by_get)}
    assert listed(gateway) == {}
    reply = call(gateway, "/v1/chat/completions", json={"messages": "Say hello.", "max_tokens": 3}).json()
    assert reply["sources"] == [] and "No documents" in reply["retrieval"]
