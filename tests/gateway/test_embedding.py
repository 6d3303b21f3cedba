"""How the gateway embeds: a question's and a chunk's requests each carry their fields (the OpenAI client's
extra_body, through LangChain's OpenAIEmbeddings, as the embedding service receives them), none where none are set;
the record an index keeps of its vector space (with the prompts the service says it applies), and the refusal of
another naming both models."""

from __future__ import annotations

import json

import httpx
from langchain_openai import OpenAIEmbeddings

from ovgenai_common.errors import ErrorKind
from ovgenai_services.gateway import embedding
from ovgenai_services.gateway.embedding import Embedder, ServicePrompts, VectorSpace, recorded_space

SPACE = VectorSpace("minilm", {"input_type": "query"}, {"input_type": "document"})


def recording_embeddings(bodies: list[dict]) -> OpenAIEmbeddings:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        data = [{"object": "embedding", "index": i, "embedding": [1.0, 0.0]} for i in range(len(body["input"]))]
        return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"],
                                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return OpenAIEmbeddings(base_url="http://embedding.test/v1", api_key="k", model="minilm", max_retries=0,
                            check_embedding_ctx_length=False, http_async_client=client)


async def test_a_question_is_embedded_as_a_query_and_chunks_as_documents():
    bodies: list[dict] = []
    embedder = Embedder(recording_embeddings(bodies), SPACE)
    assert await embedder.query("who?") == [1.0, 0.0]
    assert await embedder.documents(["a", "b"]) == [[1.0, 0.0]] * 2
    assert [(body["input"], body["input_type"]) for body in bodies] == [(["who?"], "query"), (["a", "b"], "document")]
    await Embedder(recording_embeddings(bodies), VectorSpace("minilm")).query("who?")
    assert "input_type" not in bodies[-1]  # no fields: OpenAI's own body


def test_the_record_of_a_vector_space_and_the_refusal_of_another():
    record = SPACE.record()
    assert record == {"embedding_model": "minilm", "embedding_query_fields": '{"input_type": "query"}',
                      "embedding_document_fields": '{"input_type": "document"}'}
    assert recorded_space({"hnsw:space": "cosine", **record}) == record and recorded_space({"made": 1}) == {}
    refusal = VectorSpace("bge").conflict(record, "chatqna")
    assert refusal.kind is ErrorKind.CONFLICT and refusal.status == 409
    assert refusal.message.startswith("The index 'chatqna' was built with embedding model 'minilm' (queries "
                                      '{"input_type": "query"}, documents {"input_type": "document"}, prompts '
                                      "unknown), but this gateway embeds with 'bge' (queries {}, documents {}, "
                                      "prompts unknown)")


def test_prompts_are_recorded_where_the_service_says_them_and_held_only_then():
    said = VectorSpace("minilm", SPACE.query, SPACE.document, prompts='{"query": "query: "}')
    assert said.record() == {**SPACE.record(), "embedding_prompts": '{"query": "query: "}'}
    assert said.differs({**SPACE.record(), "embedding_prompts": '{"query": "search: "}'})
    assert not said.differs(SPACE.record())  # an index of an earlier version recorded none
    assert not SPACE.differs(said.record())  # a service that does not say them is not held to them
    assert SPACE.differs({**said.record(), "embedding_model": "bge"})


async def test_the_service_s_prompts_are_read_from_its_models_list_and_asked_again_after_a_while(monkeypatch):
    answers = [{"data": [{"id": "other"}, {"id": "minilm", "prompts": {"query": "query: "}}]},
               {"data": [{"id": "minilm", "prompts": {"query": "q: "}}]}]
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(200, json=answers[min(len(asked), 2) - 1])

    client = httpx.AsyncClient(base_url="http://embedding.test", transport=httpx.MockTransport(answer))
    prompts = ServicePrompts(client, "minilm")
    assert await prompts() == await prompts() == '{"query": "query: "}' and asked == ["/v1/models"]
    monkeypatch.setattr(embedding, "PROMPTS_TTL_SECONDS", 0.0)
    assert await prompts() == '{"query": "q: "}'
    space = await Embedder(recording_embeddings([]), SPACE, prompts).current_space()
    assert space.prompts == '{"query": "q: "}' and space.model == "minilm"


async def test_a_service_that_does_not_say_its_prompts_or_cannot_be_asked_gives_none():
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "down.test":
            raise httpx.ConnectError("refused")
        if request.url.host == "tei.test":
            return httpx.Response(404, json={"error": "not found"})
        return httpx.Response(200, json={"object": "list", "data": [{"id": "minilm", "object": "model"}]})

    for host in ("down.test", "tei.test", "openai.test"):
        client = httpx.AsyncClient(base_url=f"http://{host}", transport=httpx.MockTransport(answer))
        assert await ServicePrompts(client, "minilm")() is None
