"""The gateway against the real embedding service, LLM microservice and backend on loopback."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ovgenai_services.gateway.settings import DEFAULT_PROMPT
from tests.gateway.facts import FACTS, documents, grounded, minimal_pdf, source_of


@pytest.fixture(scope="module")
def gateway(ingested_gateway):  # conftest.py: the documents ingested
    return ingested_gateway


def test_documents_listed_as_opea_entries_with_chunk_counts(gateway):
    entries = httpx.get(gateway.url + "/v1/dataprep/get").json()
    listed = {d["name"]: d["chunks"] for d in entries}
    assert set(listed) >= {"almanac.txt", "notes.md", "almanac.html"}
    assert all(count >= 1 for count in listed.values())
    assert all((d["id"], d["type"], d["parent"]) == (d["name"], "File", "") for d in entries)


def test_retrieval_hit_rate(gateway):
    hits = 0
    for index, (fact, question, _) in enumerate(FACTS):
        sources = httpx.post(gateway.url + "/v1/retrieve", json={"query": question, "k": 4}).json()["sources"]
        hits += any(s["document"] == source_of(index) and fact in s["text"] for s in sources)
    rate = hits / len(FACTS)
    assert rate >= 0.9, f"retrieval hit rate @4: {rate:.2f} over {len(FACTS)} questions"


def test_chatqna_stream_cites_the_right_source(gateway):
    question = "What is the name of the Zorblat festival mascot?"
    body = {"messages": question, "max_tokens": 40}
    response = httpx.post(gateway.url + "/v1/chatqna", params={"stream_format": "openai"}, json=body, timeout=120)
    lines = [line for line in response.text.split("\n") if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and chunks[0]["choices"][0]["delta"]["content"]
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] in ("stop", "length")
    assert final["sources"][0]["document"] == "almanac.html"
    answer = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert grounded(answer, " ".join(s["text"] for s in final["sources"]), question), answer


def test_openai_client_unary_with_sources(gateway):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    question = "Who discovered zephyrine?"
    reply = client.chat.completions.create(
        model="chatqna", messages=[{"role": "user", "content": question}], max_tokens=30
    )
    sources = reply.model_extra["sources"]
    assert sources[0]["document"] == "almanac.txt" and "zephyrine" in sources[0]["text"]
    answer = reply.choices[0].message.content
    assert grounded(answer, " ".join(s["text"] for s in sources), question), answer


@pytest.mark.parametrize("role", ["system", "developer"])
def test_the_clients_system_message_reaches_the_llm(gateway, role):
    """It was dropped: the same prompt tokens with and without it."""
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    question = {"role": "user", "content": "Who discovered zephyrine?"}
    instruction = {"role": role, "content": "Answer in one short sentence, as a ship's captain would."}
    plain = client.chat.completions.create(model="chatqna", messages=[question], max_tokens=2)
    instructed = client.chat.completions.create(model="chatqna", messages=[instruction, question], max_tokens=2)
    assert instructed.usage.prompt_tokens >= plain.usage.prompt_tokens + 10


def test_langchain_against_gateway(gateway):
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=gateway.url + "/v1", api_key="unused", model="chatqna", max_tokens=30)
    question = "Who discovered zephyrine?"
    corpus = " ".join(documents().values())
    invoked = chat.invoke(question).content
    streamed = "".join(c.content for c in chat.stream(question))
    assert grounded(invoked, corpus, question), invoked
    assert streamed == invoked  # the same greedy answer, streamed


def test_langchain_streamed_usage_through_the_gateway(gateway):
    """stream_options.include_usage: the LLM's counts in a last chunk, so LangChain's usage_metadata is set."""
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=gateway.url + "/v1", api_key="unused", model="chatqna", max_tokens=8,
                      stream_usage=True)
    total = None
    for chunk in chat.stream("Who discovered zephyrine?"):
        total = chunk if total is None else total + chunk
    assert total is not None and total.usage_metadata is not None
    assert total.usage_metadata["input_tokens"] > 0 and 0 < total.usage_metadata["output_tokens"] <= 8


def test_the_responses_api_answers_from_the_documents_with_citations(gateway):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    question = "Who discovered zephyrine?"
    response = client.responses.create(model="chatqna", input=question, max_output_tokens=30)
    [citation, *_] = response.output[0].content[0].annotations
    assert citation.type == "file_citation" and citation.filename == "almanac.txt"
    sources = response.model_extra["sources"]
    assert grounded(response.output_text, " ".join(s["text"] for s in sources), question), response.output_text
    events = list(client.responses.create(model="chatqna", input=question, max_output_tokens=30, stream=True))
    streamed = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert streamed == events[-1].response.output_text == response.output_text  # greedy: the same answer
    follow = client.responses.create(model="chatqna", input="Say it again.", previous_response_id=response.id,
                                     max_output_tokens=4)
    assert follow.usage.input_tokens > response.usage.input_tokens  # the first turn was read again


def test_history_is_kept_and_the_right_source_cited(gateway, backend, default_model):
    messages = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Who wrote the book Patterns of Tide?"},
    ]
    reply = httpx.post(gateway.url + "/v1/chat/completions", json={"messages": messages, "max_tokens": 30},
                       timeout=120).json()
    assert reply["choices"][0]["message"]["content"]
    assert reply["sources"][0]["document"] == "notes.md"
    # The LLM was given the earlier turns: the prompt it answered counts exactly the tokens of the system prompt
    # and all three messages (the backend counts them itself), more than of the last question alone.
    context = "\n\n".join(f"[{s['document']}] {s['text']}" for s in reply["sources"])
    system = {"role": "system", "content": DEFAULT_PROMPT.replace("{context}", context)}

    def tokens(conversation: list[dict]) -> int:
        body = {"model": default_model, "messages": [system, *conversation], "max_tokens": 1}
        return httpx.post(backend.url + "/v1/chat/completions", json=body, timeout=60).json()["usage"]["prompt_tokens"]

    assert reply["usage"]["prompt_tokens"] == tokens(messages) > tokens(messages[-1:])


def test_reingest_is_idempotent_and_replaces(gateway):
    text = "The Moonwick canal is 42 kilometres long."
    first = httpx.post(gateway.url + "/v1/dataprep/ingest", data={"text": [text], "name": ["canal.txt"]}).json()
    again = httpx.post(gateway.url + "/v1/dataprep/ingest", data={"text": [text], "name": ["canal.txt"]}).json()
    assert first["documents"][0]["status"] == "ingested" and again["documents"][0]["status"] == "unchanged"
    changed = httpx.post(gateway.url + "/v1/dataprep/ingest",
                         data={"text": [text + " It was dug in 1802."], "name": ["canal.txt"]}).json()
    assert changed["documents"][0]["status"] == "replaced"
    listed = {d["name"]: d["chunks"] for d in httpx.get(gateway.url + "/v1/dataprep/get").json()}
    assert listed["canal.txt"] == 1
    sources = httpx.post(gateway.url + "/v1/retrieve", json={"query": "Moonwick canal length"}).json()["sources"]
    assert "1802" in sources[0]["text"]
    assert httpx.post(gateway.url + "/v1/dataprep/delete", json={"file_path": "canal.txt"}).json()["status"]
    assert "canal.txt" not in {d["name"] for d in httpx.get(gateway.url + "/v1/dataprep/get").json()}


def test_pdf_upload(gateway):
    pdf = minimal_pdf("The Quorra comet returns every 61 years.")
    response = httpx.post(gateway.url + "/v1/dataprep/ingest",
                          files=[("files", ("comet.pdf", pdf, "application/pdf"))], timeout=60)
    assert response.json()["documents"][0]["chunks"] == 1
    sources = httpx.post(gateway.url + "/v1/retrieve", json={"query": "Quorra comet"}).json()["sources"]
    assert sources[0]["document"] == "comet.pdf" and "61 years" in sources[0]["text"]


def test_bad_uploads(gateway, tmp_path):
    unsupported = httpx.post(gateway.url + "/v1/dataprep/ingest", files=[("files", ("x.exe", b"MZ", "x"))])
    assert unsupported.status_code == 400 and ".pdf" in unsupported.json()["error"]["message"]
    broken = httpx.post(gateway.url + "/v1/dataprep/ingest", files=[("files", ("bad.pdf", b"%PDF-1.4 nope", "x"))])
    assert broken.status_code == 400 and "pdf" in broken.json()["error"]["message"]
    empty = httpx.post(gateway.url + "/v1/dataprep/ingest", files=[("files", ("e.txt", b"", "text/plain"))])
    assert empty.status_code == 400
    nothing = httpx.post(gateway.url + "/v1/dataprep/ingest")
    assert nothing.status_code == 400
    sneaky = httpx.post(gateway.url + "/v1/dataprep/ingest",
                        files=[("files", ("../../../tmp/evil.txt", b"The Zeppo lamp is orange.", "text/plain"))])
    assert sneaky.json()["documents"][0]["name"] == "evil.txt"
    assert not (tmp_path.parent / "evil.txt").exists()
    httpx.post(gateway.url + "/v1/dataprep/delete", json={"file_path": "evil.txt"})
    missing = httpx.post(gateway.url + "/v1/dataprep/delete", json={"file_path": "nope.txt"})
    assert missing.status_code == 404


def test_health_details_report_dependencies(gateway):
    body = httpx.get(gateway.url + "/health/details").json()["dependencies"]
    assert body["embedding"] == "ok" and body["llm"] == "ok"
    assert body["vector_store"].startswith("ok")
    assert body["rerank"].startswith("off")
    metrics = httpx.get(gateway.url + "/metrics").text
    for name in ("rag_embed_seconds", "rag_retrieve_seconds", "rag_rerank_seconds", "rag_llm_first_token_seconds",
                 "rag_first_token_seconds", "rag_total_seconds"):
        assert f"# TYPE {name} histogram" in metrics


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/retrieve", {"query": "Quorra comet", "k": True}, "k"),  # found by the fuzzer: true was taken as 1
        ("/v1/retrieve", {"query": "Quorra comet", "depth": 3}, "depth"),
        ("/v1/dataprep/delete", {"file_path": "x.txt", "recursive": True}, "recursive"),
        # 0 in the LLM engine's 32-bit float, which refuses it naming no field
        ("/v1/chatqna", {"messages": "Quorra comet?", "repetition_penalty": 1e-300}, "repetition_penalty"),
        # refused by the embedding service, which named its own field
        ("/v1/retrieve", {"query": "  "}, "query"),
    ],
)
def test_strict_bodies_refuse_what_they_do_not_know(gateway, path, body, param):
    response = httpx.post(gateway.url + path, json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text
