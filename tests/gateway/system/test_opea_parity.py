"""The gateway as OPEA's clients use it, with payloads shaped like those of OPEA's documentation (GenAIComps'
dataprep guide, GenAIExamples' ChatQnA guide and UIs): dataprep ingest/get/delete/indices, /v1/chatqna with `k`,
`top_n` and `top_k`, OPEA's stream format on request, per-stage timings and metrics; one gateway with default
settings (no reranker, links to loopback refused)."""

from __future__ import annotations

import ast
import json

import httpx
import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import gateway_env
from tests.gateway.facts import documents, grounded
from tests.gateway.pages import Page, PageServer
from tests.support.servers import RemoteServer

QUESTION = "What is the name of the Zorblat festival mascot?"
OPEA_KEYS = {"name", "id", "type", "parent"}


@pytest.fixture(scope="module")
def gateway(embedding_service, llm_service, tmp_path_factory):
    env = gateway_env(embedding_service.url, llm_service.url, tmp_path_factory.mktemp("opea"))
    with RemoteServer("ovgenai_services.gateway", env=env) as server:
        # As OPEA's dataprep guide uploads: several `files`, with chunk_size and chunk_overlap form fields.
        files = [("files", (name, body.encode(), "text/plain")) for name, body in documents().items()]
        response = httpx.post(server.url + "/v1/dataprep/ingest", files=files,
                              data={"chunk_size": "1500", "chunk_overlap": "100"}, timeout=120)
        server.ingested = response
        yield server


def post(gateway, path: str, **kwargs) -> httpx.Response:
    return httpx.post(gateway.url + path, timeout=120, **kwargs)


def chunk_counts(gateway) -> dict[str, int]:
    return {d["id"]: d["chunks"] for d in httpx.get(gateway.url + "/v1/dataprep/get").json()}


def unary(gateway, **body) -> dict:
    response = post(gateway, "/v1/chatqna", json={"messages": QUESTION, "stream": False, **body})
    assert response.status_code == 200, response.text
    return response.json()


def counts(gateway) -> dict[str, float]:
    text = httpx.get(gateway.url + "/metrics").text
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("rag_") and s.name.endswith("_count")}


def test_ingest_answers_opea_body_and_honours_chunk_size(gateway):
    body = gateway.ingested.json()
    assert gateway.ingested.status_code == 200 and (body["status"], body["message"]) == (200,
                                                                                        "Data preparation succeeded")
    expected = RecursiveCharacterTextSplitter(chunk_size=1500, chunk_overlap=100).split_text(documents()["almanac.txt"])
    assert chunk_counts(gateway)["almanac.txt"] == len(expected) > 1


def test_chunk_size_and_overlap_per_request_and_their_bounds(gateway):
    text = " ".join(f"Survey entry {i} lists lock number {i * 7} of the Moonwick canal." for i in range(12))
    form = {"text": [text], "name": ["survey.txt"]}
    for size, overlap, status in ((120, 30, "ingested"), (300, 0, "replaced")):
        response = post(gateway, "/v1/dataprep/ingest", data={**form, "chunk_size": str(size),
                                                              "chunk_overlap": str(overlap)})
        expected = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap).split_text(text)
        assert response.json()["documents"] == [{"name": "survey.txt", "chunks": len(expected), "status": status}]
        assert chunk_counts(gateway)["survey.txt"] == len(expected)
    before = chunk_counts(gateway)
    for fields, param in (({"chunk_size": "49"}, "chunk_size"), ({"chunk_size": "10001"}, "chunk_size"),
                          ({"chunk_size": "many"}, "chunk_size"), ({"chunk_overlap": "-1"}, "chunk_overlap"),
                          ({"chunk_size": "200", "chunk_overlap": "200"}, "chunk_overlap")):
        response = post(gateway, "/v1/dataprep/ingest", data={"text": ["A new text."], "name": ["new.txt"], **fields})
        assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text
    assert chunk_counts(gateway) == before


def test_get_lists_opea_entries_however_opea_clients_ask(gateway):
    by_get = httpx.get(gateway.url + "/v1/dataprep/get").json()
    assert {"almanac.txt", "notes.md", "almanac.html"} <= {entry["id"] for entry in by_get}
    for entry in by_get:
        assert OPEA_KEYS <= entry.keys() and entry["type"] == "File" and entry["parent"] == ""
        assert entry["id"] == entry["name"] and entry["chunks"] >= 1
    assert post(gateway, "/v1/dataprep/get", json={"index_name": "all"}).json() == by_get  # OPEA's guide
    # OPEA's Svelte UI: a POST with a JSON content type and no body.
    assert post(gateway, "/v1/dataprep/get", headers={"Content-Type": "application/json"}).json() == by_get
    assert post(gateway, "/v1/dataprep/get", json={"index_name": "chatqna"}).json() == by_get
    assert post(gateway, "/v1/dataprep/get", json={"index_name": "elsewhere"}).json() == []


def test_delete_by_the_id_get_lists_and_indices(gateway):
    post(gateway, "/v1/dataprep/ingest", data={"text": ["The Zeppo lamp is orange."], "name": ["lamp.txt"]})
    [entry] = [e for e in post(gateway, "/v1/dataprep/get").json() if e["name"] == "lamp.txt"]
    wrong_index = post(gateway, "/v1/dataprep/delete", json={"file_path": entry["id"], "index_name": "elsewhere"})
    assert wrong_index.status_code == 404 and wrong_index.json()["error"]["param"] == "index_name"
    deleted = post(gateway, "/v1/dataprep/delete", json={"file_path": entry["id"], "index_name": "chatqna"})
    assert deleted.json() == {"status": True, "deleted_chunks": 1}
    assert "lamp.txt" not in chunk_counts(gateway)
    assert post(gateway, "/v1/dataprep/indices").json() == httpx.get(gateway.url + "/v1/dataprep/indices").json() \
        == ["chatqna"]


def test_links_to_loopback_are_refused_by_default(gateway):
    pages = PageServer({"/a.html": Page(b"<p>The Zeppo lamp is orange.</p>", "text/html")})
    try:
        for link, says in ((pages.url("/a.html"), "127.0.0.1 is a loopback address"),
                           (pages.url("/a.html", host="localhost"), "localhost resolves to a non-public address")):
            response = post(gateway, "/v1/dataprep/ingest", data={"link_list": json.dumps([link])})
            error = response.json()["error"]
            assert response.status_code == 400 and error["param"] == "link_list", response.text
            assert says in error["message"] and "LINK_ALLOWED_NETWORKS" in error["message"]
            if "localhost" in link:  # what a name resolves to is not told
                assert "127.0.0.1" not in error["message"] and "::1" not in error["message"]
        assert pages.requests == []  # refused before any connection
    finally:
        pages.stop()


def test_chatqna_takes_opea_body(gateway):
    # The fields OPEA's ChatQnA megaservice reads, with its defaults' values.
    reply = unary(gateway, k=2, top_n=1, top_k=10, top_p=0.95, temperature=0.01, repetition_penalty=1.03,
                  frequency_penalty=0.0, presence_penalty=0.0, max_tokens=12, search_type="similarity", fetch_k=20,
                  lambda_mult=0.5, score_threshold=0.2, model="chatqna")
    assert reply["object"] == "chat.completion" and reply["model"] == "chatqna"
    assert len(reply["sources"]) == 2  # k chunks: without a reranker top_n keeps nothing out
    assert reply["sources"][0]["document"] == "almanac.html"
    assert 0 < reply["usage"]["completion_tokens"] <= 12
    parts = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]  # OPEA's content parts
    assert unary(gateway, messages=parts, k=1, max_tokens=2)["sources"][0]["document"] == "almanac.html"


def test_top_k_samples_the_llm_and_k_is_the_retrieval_depth(gateway):
    greedy = [unary(gateway, k=2, max_tokens=24, temperature=0) for _ in range(2)][-1]  # the prompt now cached
    only_best = unary(gateway, k=2, max_tokens=24, temperature=2.0, top_k=1, seed=7)
    hot = unary(gateway, k=2, max_tokens=24, temperature=2.0, seed=7)
    answer = greedy["choices"][0]["message"]["content"]
    assert len(only_best["sources"]) == 2  # top_k=1 did not cut retrieval
    assert only_best["choices"][0]["message"]["content"] == answer  # the single most likely token, every step
    assert hot["choices"][0]["message"]["content"] != answer


def test_search_types(gateway):
    similar = [s["text"] for s in unary(gateway, k=3, max_tokens=1)["sources"]]
    mmr = unary(gateway, k=3, max_tokens=1, search_type="mmr", fetch_k=10, lambda_mult=1.0)["sources"]
    assert [s["text"] for s in mmr] == similar  # mmr with all weight on relevance is plain similarity
    assert unary(gateway, k=3, max_tokens=1, search_type="similarity_score_threshold",
                 score_threshold=0.99)["sources"] == []
    near = unary(gateway, k=3, max_tokens=1, search_type="similarity_distance_threshold", distance_threshold=2.0)
    assert [s["text"] for s in near["sources"]] == similar
    for body, param in (({"search_type": "similarity_distance_threshold"}, "distance_threshold"),
                        ({"search_type": "nearest"}, "search_type"), ({"k": True}, "k"),
                        ({"index_name": "no/slash"}, "index_name"), ({"chat_template": "no slots"}, "chat_template")):
        response = post(gateway, "/v1/chatqna", json={"messages": QUESTION, **body})
        assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text
    response = post(gateway, "/v1/chatqna", json={"messages": QUESTION, "index_name": "elsewhere"})
    assert response.status_code == 404 and response.json()["error"]["param"] == "index_name", response.text


def test_chat_template_is_the_whole_prompt(gateway, backend, default_model):
    template = "### Search results: {context}\n### Question: {question}\n### Answer:"
    reply = unary(gateway, k=1, max_tokens=3, chat_template=template)
    context = "\n\n".join(f"[{s['document']}] {s['text']}" for s in reply["sources"])
    prompt = template.replace("{context}", context).replace("{question}", QUESTION)
    body = {"model": default_model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1}
    counted = httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=60).json()["usage"]
    assert reply["usage"]["prompt_tokens"] == counted["prompt_tokens"]


def opea_text(response: httpx.Response) -> str:
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in response.text.split("\n") if line]
    assert lines[-1] == "data: [DONE]" and len(lines) > 2
    pieces = [ast.literal_eval(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(isinstance(piece, bytes) for piece in pieces)  # b'...' lines, as OPEA's UIs parse them
    return b"".join(pieces).decode()


def openai_stream(response: httpx.Response) -> list[dict]:
    lines = [line for line in response.text.split("\n") if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def test_the_stream_format_follows_the_request(gateway):
    """OPEA's UIs send the question as a string and parse `data: b'...'` (they needed ?stream_format=opea); a list of
    messages is OpenAI's shape; a format asked for, by query or header, wins."""
    body = {"messages": QUESTION, "max_tokens": 16, "k": 2}
    post(gateway, "/v1/chatqna", json=body)  # the prompt now cached: the next answers are computed alike
    as_opea_sends_it = opea_text(post(gateway, "/v1/chatqna", json=body))
    by_header = opea_text(post(gateway, "/v1/chatqna", headers={"X-Stream-Format": "opea"}, json={
        **body, "messages": [{"role": "user", "content": QUESTION}]}))
    chunks = openai_stream(post(gateway, "/v1/chatqna", params={"stream_format": "openai"}, json=body))
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    answer = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    assert as_opea_sends_it == by_header == answer
    assert grounded(answer, " ".join(s["text"] for s in chunks[-1]["sources"]), QUESTION), answer


def test_timings_and_per_stage_metrics(gateway):
    before = counts(gateway)
    chunks = openai_stream(post(gateway, "/v1/chatqna", params={"stream_format": "openai"},
                                json={"messages": QUESTION, "max_tokens": 4}))
    after = counts(gateway)
    timings = chunks[-1]["timings"]
    assert set(timings) == {"embed_ms", "retrieve_ms", "rerank_ms", "llm_first_token_ms", "total_ms"}
    assert timings["rerank_ms"] is None  # no reranker
    assert all(isinstance(timings[k], float) for k in ("embed_ms", "retrieve_ms", "llm_first_token_ms", "total_ms"))
    assert timings["total_ms"] >= timings["llm_first_token_ms"]
    for stage in ("embed", "retrieve", "llm_first_token", "total", "first_token"):
        assert after[f"rag_{stage}_seconds_count"] == before[f"rag_{stage}_seconds_count"] + 1, stage
    assert after["rag_rerank_seconds_count"] == 0
    unary_timings = unary(gateway, max_tokens=2)["timings"]
    assert unary_timings["llm_first_token_ms"] is None and unary_timings["total_ms"] > 0


def test_health_says_there_is_no_reranker(gateway):
    opea = httpx.get(gateway.url + "/v1/health_check")
    health = httpx.get(gateway.url + "/health")
    details = httpx.get(gateway.url + "/health/details")
    assert opea.status_code == health.status_code == details.status_code == 200
    assert "Dependencies" not in opea.json() and health.json() == {"status": "ok"}  # the details need the key
    rerank = details.json()["dependencies"]["rerank"]
    assert rerank.startswith("off") and "RERANK_SERVER_ENDPOINT" in rerank


def test_langchain_max_tokens_is_honoured(gateway):
    from langchain_openai import ChatOpenAI

    # LangChain sends max_tokens as OpenAI's newer max_completion_tokens.
    chat = ChatOpenAI(base_url=gateway.url + "/v1", api_key="unused", model="chatqna", max_tokens=3)
    assert 0 < chat.invoke(QUESTION).usage_metadata["output_tokens"] <= 3
