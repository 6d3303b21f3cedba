"""The embedding service's routes over the service's own methods with the model stood in for (stand_ins.py):
OpenAI's, TEI's and Cohere's shapes, the truncation header, errors naming each API's own field, and 503 until the
model has loaded. The real model: system/test_embedding_service.py."""

from __future__ import annotations

import base64
import struct
from contextlib import asynccontextmanager
from types import SimpleNamespace

import httpx

from ovgenai_services.embedding.app import create_app
from ovgenai_services.embedding.prompts import Prompts
from ovgenai_services.embedding.router import readiness
from ovgenai_services.embedding.settings import EmbeddingSettings
from tests.embedding.stand_ins import service


@asynccontextmanager
async def embedding(svc=None):
    app = create_app(EmbeddingSettings())
    app.state.service = svc  # the lifespan, which loads the real model, does not run
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http


async def test_openai_embeddings_in_floats_and_base64():
    async with embedding(service()) as http:
        reply = await http.post("/v1/embeddings", json={"input": ["a", "b"]})
        assert reply.status_code == 200 and "X-Inputs-Truncated" not in reply.headers
        body = reply.json()
        assert [d["embedding"] for d in body["data"]] == [[3.0, 4.0]] * 2 and body["model"] == "m"
        assert body["usage"] == {"prompt_tokens": 6, "total_tokens": 6}  # the stand-in's 3 tokens a text
        packed = (await http.post("/v1/embeddings", json={"input": "a", "encoding_format": "base64",
                                                          "model": "named"})).json()
        assert packed["model"] == "named"
        assert struct.unpack("<2f", base64.b64decode(packed["data"][0]["embedding"])) == (3.0, 4.0)


async def test_truncated_inputs_are_counted_in_a_header():
    svc = service(max_tokens=2)  # the stand-in's texts have 3 tokens
    async with embedding(svc) as http:
        reply = await http.post("/v1/embeddings", json={"input": ["a", "b", "c"]})
        assert reply.headers["X-Inputs-Truncated"] == "3" and reply.json()["usage"]["prompt_tokens"] == 6
        tei = await http.post("/embed", json={"inputs": "a"})
        assert tei.json() == [[3.0, 4.0]] and tei.headers["X-Inputs-Truncated"] == "1"


async def test_errors_name_each_api_s_own_field():
    async with embedding(service()) as http:
        openai = await http.post("/v1/embeddings", json={"input": ["  "]})
        tei = await http.post("/embed", json={"inputs": ["  "]})
        unknown = await http.post("/v1/embeddings", json={"input": "a", "best_of": 2})
        dimensions = await http.post("/v1/embeddings", json={"input": "a", "dimensions": 3})
    assert (openai.status_code, openai.json()["error"]["param"]) == (400, "input")
    assert (tei.status_code, tei.json()["error"]["param"]) == (400, "inputs")
    assert unknown.json()["error"]["param"] == "best_of" and dimensions.json()["error"]["param"] == "dimensions"


async def test_rerank_in_cohere_s_and_tei_s_shapes():
    async with embedding(service()) as http:
        cohere = (await http.post("/v1/rerank", json={"query": "q", "documents": ["a", "b"], "top_n": 1,
                                                      "return_documents": True})).json()
        tei = (await http.post("/rerank", json={"query": "q", "texts": ["a", "b"], "return_text": True})).json()
        bare = (await http.post("/rerank", json={"query": "q", "texts": ["a"]})).json()
    assert cohere == {"model": "reranker", "results": [{"index": 0, "relevance_score": 1.0,
                                                        "document": {"text": "a"}}]}
    assert tei == [{"index": 0, "score": 1.0, "text": "a"}, {"index": 1, "score": 1.0, "text": "b"}]
    assert bare == [{"index": 0, "score": 1.0}]


async def test_models_lists_the_served_name_and_its_prompts():
    async with embedding(service()) as http:
        assert (await http.get("/v1/models")).json()["data"] == [
            {"id": "m", "object": "model", "owned_by": "ovgenai", "prompts": {}, "default_prompt_name": None}]
    prompts = Prompts({"query": "query: ", "passage": "passage: "}, "query")
    async with embedding(service(prompts=prompts)) as http:
        model = (await http.get("/v1/models")).json()["data"][0]
    assert (model["prompts"], model["default_prompt_name"]) == ({"query": "query: ", "passage": "passage: "}, "query")


async def test_everything_is_503_until_the_model_has_loaded():
    async with embedding(None) as http:
        reply = await http.post("/v1/embeddings", json={"input": "a"})
        health = await http.get("/health")
        opea = await http.get("/v1/health_check")
        details = await http.get("/health/details")
    assert reply.status_code == 503 and reply.json()["error"]["message"] == "The embedding model is loading."
    assert health.status_code == opea.status_code == 503 and "Model" not in opea.json()  # open: up or down only
    assert details.status_code == 503 and details.json()["reason"] == details.json()["Model"] == "loading"


async def test_ready_once_the_batching_worker_runs():
    svc = service()
    async with embedding(svc) as http:
        assert (await http.get("/health/details")).json()["Model"] == "m"
        svc.batcher.alive = False
        stopped = await http.get("/health/details")
    assert stopped.status_code == 503 and stopped.json()["reason"] == "the batching worker stopped"


async def test_not_ready_while_the_model_process_starts_again():
    svc = service()
    request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(service=svc)))
    assert (await readiness(request)).ready
    svc.model.alive = False
    waiting = await readiness(request)
    assert not waiting.ready and waiting.reason == "the model process stopped; it is starting again"
