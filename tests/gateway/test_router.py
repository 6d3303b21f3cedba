"""The chat routes on the real app over ASGI, the LLM and embedding services on MockTransport: a question's checks
(validation.py) are 400s that name the field, a question is answered from the index it names, the two chat bodies
differ only in their stream default, and the health of each dependency is reported behind the key, the open
probes saying only up or down. The same against the real services: system/test_gateway.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from ovgenai_services.gateway.app import create_app
from ovgenai_services.gateway.settings import GatewaySettings
from tests.gateway.fake_upstreams import EMBEDDING, LLM, RERANK, FakeUpstreams, gateway


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": "  "}]}, "messages"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "messages"),
    ({"messages": "q", "index_name": "no/such"}, "index_name"),
    ({"messages": "q", "search_type": "similarity_distance_threshold"}, "distance_threshold"),
    ({"messages": "q", "chat_template": "no placeholder"}, "chat_template"),
])
async def test_a_bad_question_is_a_400_before_any_upstream_call(tmp_path, body, param):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        reply = await http.post("/v1/chatqna", json=body)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
    assert upstreams.chats == [] and upstreams.embedded == []


async def test_a_question_is_answered_from_the_index_it_names_and_an_unknown_one_is_a_404(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        for form in ({"text": ["The tower has 212 steps."], "name": ["tower.txt"], "index_name": "team"},
                     {"text": ["The canal is long."], "name": ["canal.txt"]}):
            assert (await http.post("/v1/dataprep/ingest", data=form)).status_code == 200
        ask = {"messages": [{"role": "user", "content": "How many steps?"}], "stream": False}
        for route in ("/v1/chatqna", "/v1/chat/completions"):
            answer = (await http.post(route, json={**ask, "index_name": "team"})).json()
            assert [source["document"] for source in answer["sources"]] == ["tower.txt"]
            assert "The tower has 212 steps." in upstreams.chats[-1]["messages"][0]["content"]
        default = (await http.post("/v1/chatqna", json=ask)).json()
        assert [source["document"] for source in default["sources"]] == ["canal.txt"]
        retrieved = (await http.post("/v1/retrieve", json={"query": "steps", "index_name": "team"})).json()
        assert [source["document"] for source in retrieved["sources"]] == ["tower.txt"]
        asked, embedded = len(upstreams.chats), len(upstreams.embedded)
        for route in ("/v1/chatqna", "/v1/chat/completions", "/v1/retrieve"):
            body = {"query": "steps"} if route == "/v1/retrieve" else ask
            unknown = await http.post(route, json={**body, "index_name": "nowhere"})
            assert unknown.status_code == 404 and "'nowhere'" in unknown.json()["error"]["message"], unknown.text
        assert (len(upstreams.chats), len(upstreams.embedded)) == (asked, embedded)


async def test_chatqna_streams_by_default_and_openai_chat_does_not(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams, max_tokens=7) as http:
        streamed = await http.post("/v1/chatqna", json={"messages": "Who?"})
        unary = await http.post("/v1/chat/completions", json={"model": "chatqna", "messages": [
            {"role": "user", "content": "Who?"}], "unknown_field": 1})  # ignored, as OPEA's clients expect
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text.rstrip().endswith("data: [DONE]")
    assert unary.json()["choices"][0]["message"]["content"] == upstreams.answer
    assert all(chat.get("max_completion_tokens", chat.get("max_tokens")) == 7 for chat in upstreams.chats)


async def test_health_details_name_each_dependency_and_the_probes_only_up_or_down(tmp_path):
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams) as http:
        ready = (await http.get("/health/details")).json()["dependencies"]
        upstreams.down.add("llm.test")
        failing, details = await http.get("/health"), await http.get("/health/details")
        opea = await http.get("/v1/health_check")
    assert ready["embedding"] == "ok" and ready["llm"] == "ok" and ready["rerank"].startswith("off")
    assert ready["vector_store"] == "ok: embedded (0 chunks)"
    assert failing.status_code == opea.status_code == details.status_code == 503
    assert "llm" not in failing.text and set(opea.json()) == {"Service Title", "Version", "Service Description"}
    assert "llm: unreachable (ConnectError)" in details.json()["reason"]
    assert "llm.test" not in details.text


async def test_the_reranker_is_ready_by_its_health_check_and_no_probe_reranks(tmp_path):
    """A probe ran a one-text rerank: anyone could load the reranker without a key."""
    upstreams = FakeUpstreams()
    async with gateway(tmp_path, upstreams, rerank_endpoint=RERANK) as http:
        for path in ("/health", "/v1/health_check", "/health/details"):
            assert (await http.get(path)).status_code == 200, path
        assert (await http.get("/health/details")).json()["dependencies"]["rerank"] == "ok"
        upstreams.down.add("rerank.test")
        assert (await http.get("/health")).status_code == 503
    assert "/health" in upstreams.paths and "/rerank" not in upstreams.paths
    assert "/v1/embeddings" not in upstreams.paths


async def test_models_lists_the_pipeline(tmp_path):
    async with gateway(tmp_path, pipeline_name="rag") as http:
        assert (await http.get("/v1/models")).json()["data"][0]["id"] == "rag"


async def test_a_unary_answer_whose_client_leaves_stops_its_llm_call(tmp_path):
    """As a stream's disconnect does: the gateway's call to the LLM is cancelled, which the LLM microservice and the
    backend turn into an aborted generation (their own tests)."""
    upstreams = FakeUpstreams()
    asked, abandoned = asyncio.Event(), asyncio.Event()

    async def llm_that_never_answers(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/chat/completions":
            return upstreams(request)
        asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            abandoned.set()
        raise AssertionError("unreachable")

    config = GatewaySettings(data_dir=str(tmp_path), embedding_endpoint=EMBEDDING, llm_endpoint=LLM)
    app = create_app(config, transport=httpx.MockTransport(llm_that_never_answers))
    body = [json.dumps({"messages": "Who?", "stream": False}).encode()]
    sent: list[dict] = []

    async def receive() -> dict:  # the body, then the client's disconnect once the LLM has been asked
        if body:
            return {"type": "http.request", "body": body.pop(), "more_body": False}
        await asked.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/v1/chatqna", "raw_path": b"/v1/chatqna", "query_string": b"",
             "root_path": "", "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8888)}
    async with app.router.lifespan_context(app):
        await asyncio.wait_for(app(scope, receive, send), 30)
    assert abandoned.is_set()
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 499


async def test_stream_options_include_usage_gives_the_usage_chunk_only_when_asked(tmp_path):
    """LangChain's streamed usage_metadata through the gateway: the LLM's counts in a last chunk without choices."""
    async with gateway(tmp_path) as http:
        question = {"messages": [{"role": "user", "content": "Who?"}], "stream": True}
        asked = await http.post("/v1/chat/completions",
                                json={**question, "stream_options": {"include_usage": True}})
        plain = await http.post("/v1/chat/completions", json=question)
    chunks = [json.loads(line[6:]) for line in asked.text.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5,
                                                                   "total_tokens": 15}
    assert all("usage" not in json.loads(line[6:]) for line in plain.text.splitlines() if line.startswith("data: {"))


async def test_the_stream_format_follows_the_question_as_opea_and_openai_send_it(tmp_path):
    """OPEA's UIs send the question as a string and parse `data: b'...'`: they needed ?stream_format=opea."""
    async with gateway(tmp_path, FakeUpstreams()) as http:
        opea = await http.post("/v1/chatqna", json={"messages": "Who?"})
        openai = await http.post("/v1/chatqna", json={"messages": [{"role": "user", "content": "Who?"}]})
        asked = await http.post("/v1/chatqna", params={"stream_format": "openai"}, json={"messages": "Who?"})
    assert opea.text.startswith("data: b'")
    assert openai.text.startswith('data: {"') and asked.text.startswith('data: {"')
