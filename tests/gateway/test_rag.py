"""The RAG pipeline (rag.py) through LangChain's real OpenAI clients, the embedding, LLM and rerank services on
httpx.MockTransport (tests/gateway/fake_upstreams.py) and a real embedded Chroma store: what reaches the LLM (the
context, the history, the template, the sampling), what the embedding service is sent (the question as a query, the
chunks as documents), what the answer carries, and how upstream failures are said.
The same against the real services: system/test_gateway.py, system/test_gateway_settings.py."""

from __future__ import annotations

import json

import pytest
from langchain_core.documents import Document
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from prometheus_client import CollectorRegistry

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.upstream import Upstream, openai_base
from ovgenai_services.gateway.chroma import StoreLocation
from ovgenai_services.gateway.embedding import Embedder, VectorSpace
from ovgenai_services.gateway.metrics import RAGMetrics
from ovgenai_services.gateway.rag import CONDENSE_PROMPT, NO_DOCUMENTS, Prompting, Question, RAGPipeline
from ovgenai_services.gateway.rerank import Reranker
from ovgenai_services.gateway.store import DocumentStore
from tests.gateway.fake_upstreams import EMBEDDING, LLM, RERANK, FakeUpstreams

FACT = "Zephyrine was discovered by Odile Marchetti in 1911."
PROMPT = "Answer from this context:\n{context}"


@pytest.fixture
def upstreams() -> FakeUpstreams:
    return FakeUpstreams()


@pytest.fixture
async def pipeline(tmp_path, upstreams):
    made: list[Upstream] = []

    def make(history: str = "pass", rerank: bool = False) -> RAGPipeline:
        transport = upstreams.transport()
        embedding, llm = Upstream("embedding service", EMBEDDING, transport=transport), \
            Upstream("LLM service", LLM, transport=transport)
        made.extend([embedding, llm])
        embeddings = OpenAIEmbeddings(base_url=openai_base(EMBEDDING), api_key="k", model="e", max_retries=0,
                                      check_embedding_ctx_length=False, http_async_client=embedding.client)
        chat = ChatOpenAI(base_url=openai_base(LLM), api_key="k", model="m", max_retries=0,
                          http_async_client=llm.client)
        space = VectorSpace("e", {"input_type": "query"}, {"input_type": "document"})
        store = DocumentStore(StoreLocation("chatqna", data_dir=tmp_path / history), Embedder(embeddings, space),
                              embed_batch_size=8)
        reranker = None
        if rerank:
            made.append(Upstream("rerank service", RERANK, transport=transport))
            reranker = Reranker(made[-1], timeout=5)
        return RAGPipeline(store, chat, RAGMetrics(CollectorRegistry()), Prompting(PROMPT, history), reranker)

    yield make
    for upstream in made:
        await upstream.aclose()


async def add(rag: RAGPipeline, *texts: str) -> None:
    for index, text in enumerate(texts):
        async def chunks(text=text):
            yield Document(text)

        await rag.store.ingest(f"doc-{index}.txt", f"hash-{index}", chunks())


def question(*turns: str, **fields) -> Question:
    roles = ["user", "assistant"] * len(turns)
    messages = [{"role": role, "content": text} for role, text in zip(roles, turns, strict=False)]
    return Question(messages=messages, k=4, top_n=1, llm={"max_tokens": 20, "temperature": 0.0, **fields})


async def test_the_answer_comes_from_the_retrieved_context(pipeline, upstreams):
    rag = pipeline()
    await add(rag, FACT)
    reply = await rag.answer(question("Who discovered zephyrine?"), "chatqna")
    sent = upstreams.chats[-1]
    assert sent["messages"][0] == {"role": "system", "content": PROMPT.replace("{context}", f"[doc-0.txt] {FACT}")}
    assert sent["messages"][-1] == {"role": "user", "content": "Who discovered zephyrine?"}
    assert sent.get("max_completion_tokens", sent.get("max_tokens")) == 20 and sent["temperature"] == 0.0
    assert reply["choices"][0]["message"]["content"] == upstreams.answer
    assert reply["sources"][0]["document"] == "doc-0.txt" and reply["sources"][0]["text"] == FACT
    assert reply["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert {"embed_ms", "retrieve_ms", "llm_first_token_ms", "total_ms"} <= reply["timings"].keys()
    assert "Who discovered zephyrine?" in upstreams.embedded  # the question was embedded for the search
    chunk, query = upstreams.embedding_requests  # a chunk as a document, the question as a query
    assert (chunk["input"], chunk["input_type"]) == ([FACT], "document")
    assert (query["input"], query["input_type"]) == (["Who discovered zephyrine?"], "query")


async def test_without_documents_the_model_answers_alone_and_says_so(pipeline, upstreams):
    reply = await pipeline().answer(question("Who discovered zephyrine?"), "chatqna")
    assert reply["retrieval"] == NO_DOCUMENTS and reply["sources"] == []
    assert "(no documents)" in upstreams.chats[-1]["messages"][0]["content"]


async def test_earlier_turns_pass_or_condense_the_question(pipeline, upstreams):
    turns = ("Tell me about zephyrine.", "It is a mineral.", "Who found it?")
    passing = pipeline("pass")
    await passing.answer(question(*turns), "chatqna")
    assert [m["content"] for m in upstreams.chats[-1]["messages"][1:]] == list(turns)
    upstreams.chats.clear()
    condensing = pipeline("condense")
    await add(condensing, FACT)
    await condensing.answer(question(*turns), "chatqna")
    rewrite, answer = upstreams.chats
    history = "user: Tell me about zephyrine.\nassistant: It is a mineral."
    assert rewrite["messages"] == [{"role": "user",
                                    "content": CONDENSE_PROMPT.format(history=history, question="Who found it?")}]
    assert upstreams.answer in upstreams.embedded  # the rewritten question is what was searched
    assert [m["role"] for m in answer["messages"]] == ["system", "user"]  # condensed: no earlier turns


async def test_a_chat_template_is_the_whole_prompt(pipeline, upstreams):
    rag = pipeline()
    await add(rag, FACT)
    template = "Context: {context}\nQ: {question}"
    ask = Question(messages=[{"role": "user", "content": "Who?"}], k=4, top_n=1, llm={}, chat_template=template)
    await rag.answer(ask, "chatqna")
    assert upstreams.chats[-1]["messages"] == [{"role": "user", "content": f"Context: [doc-0.txt] {FACT}\nQ: Who?"}]


async def test_the_clients_instructions_lead_the_system_message(pipeline, upstreams):
    """A client's system and developer messages were dropped: OPEA's ChatQnA takes a system message as the system
    prompt."""
    rag = pipeline()
    await add(rag, FACT)
    ask = Question(messages=[{"role": "user", "content": "Who?"}], k=4, top_n=1, llm={},
                   instructions="Answer as a pirate.")
    await rag.answer(ask, "chatqna")
    [system, user] = upstreams.chats[-1]["messages"]
    assert system == {"role": "system", "content": "Answer as a pirate.\n\n"
                      + PROMPT.replace("{context}", f"[doc-0.txt] {FACT}")}
    assert user == {"role": "user", "content": "Who?"}
    ask.chat_template = "Context: {context}\nQ: {question}"
    await rag.answer(ask, "chatqna")
    assert upstreams.chats[-1]["messages"] == [{"role": "system", "content": "Answer as a pirate."},
                                               {"role": "user", "content": f"Context: [doc-0.txt] {FACT}\nQ: Who?"}]


async def test_sampling_outside_openai_goes_in_the_body(pipeline, upstreams):
    await pipeline().answer(question("Hi", top_k=5, repetition_penalty=1.1, seed=3), "chatqna")
    sent = upstreams.chats[-1]
    assert (sent["top_k"], sent["repetition_penalty"], sent["seed"]) == (5, 1.1, 3)


async def test_the_reranker_keeps_its_top_n(pipeline, upstreams):
    rag = pipeline(rerank=True)
    await add(rag, "alpha text", "beta text", "gamma text")
    upstreams.scores = {"beta text": 0.9, "gamma text": 0.5}
    sources = await rag.retrieve("which?", k=3, top_n=2)
    assert [s["text"] for s in sources] == ["beta text", "gamma text"]
    assert [s["rerank_score"] for s in sources] == [0.9, 0.5]


async def test_a_stream_carries_the_answer_then_sources(pipeline, upstreams):
    rag = pipeline()
    await add(rag, FACT)
    frames = [frame async for frame in await rag.open_stream(question("Who?"), "chatqna")]
    events = [json.loads(line[6:]) for frame in frames for line in frame.decode().splitlines()
              if line.startswith("data: {")]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert text.replace(" ", "") == upstreams.answer.replace(" ", "")
    assert events[-1]["sources"][0]["text"] == FACT and frames[-1].strip() == b"data: [DONE]"


@pytest.mark.parametrize(("failure", "kind"), [("down", ErrorKind.UNAVAILABLE), (500, ErrorKind.UPSTREAM),
                                               (404, ErrorKind.UNAVAILABLE), (504, ErrorKind.TIMEOUT)])
@pytest.mark.parametrize("stream", [False, True])
async def test_llm_failures_are_said_by_the_shared_rule(pipeline, upstreams, failure, kind, stream):
    if failure == "down":
        upstreams.down.add("llm.test")
    else:
        upstreams.status["llm.test"] = failure
    rag = pipeline()
    with pytest.raises(APIError) as failed:
        if stream:
            await rag.open_stream(question("Who?"), "chatqna")
        else:
            await rag.answer(question("Who?"), "chatqna")
    assert failed.value.kind is kind and "LLM service" in failed.value.message
    assert "llm.test" not in failed.value.message
