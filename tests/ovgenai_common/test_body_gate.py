"""One body gate for every service: each service's JSON routes, through their real apps, get JSON only as RFC 8259
has it (UTF-8, no unpaired surrogate) and only from the one Content-Type the framework reads. A body in another
encoding, a second Content-Type header or a lone surrogate anywhere in the body is a 400 in OpenAI's shape from the
gate, before any route, tokenizer or upstream sees it."""

from __future__ import annotations

import json
import re
from contextlib import asynccontextmanager
from types import SimpleNamespace

import httpx
import pytest

from ovgenai_server.app import create_app as backend_app
from ovgenai_server.torchserve.http import router as torchserve_router
from ovgenai_server.torchserve.settings import TorchServeSettings
from ovgenai_services.embedding.app import create_app as embedding_app
from ovgenai_services.embedding.settings import EmbeddingSettings
from ovgenai_services.llm.app import create_app as llm_app
from ovgenai_services.llm.settings import LLMSettings
from tests.gateway.fake_upstreams import gateway

# A body whose every string field carries an unpaired surrogate escape, as a client's JSON spells it.
LONE = "hi \ud800"
BODY = {"model": "fake-model", "prompt": LONE, "input": [LONE], "messages": [{"role": "user", "content": LONE}],
        "text": LONE, "query": LONE, "texts": [LONE], "inputs": LONE, "documents": [LONE]}
TEXT = json.dumps(BODY)  # ensure_ascii: the surrogate travels as the escape \ud800
JSON_TYPE = [("content-type", "application/json")]

# (bytes, headers): JSON in an encoding other than UTF-8, which Python's parser would have decoded all the same.
ENCODINGS = {
    "utf-16-le": (TEXT.encode("utf-16-le"), JSON_TYPE),
    "utf-16-be": (TEXT.encode("utf-16-be"), JSON_TYPE),
    "utf-16-le-bom": (b"\xff\xfe" + TEXT.encode("utf-16-le"), JSON_TYPE),
    "utf-16-be-bom": (b"\xfe\xff" + TEXT.encode("utf-16-be"), JSON_TYPE),
    "utf-32": (TEXT.encode("utf-32"), JSON_TYPE),
    "utf-32-be": (TEXT.encode("utf-32-be"), JSON_TYPE),
    "utf-8-bom": (b"\xef\xbb\xbf" + TEXT.encode(), JSON_TYPE),
    "latin-1": (TEXT.replace("hi", "café").replace("\\ud800", "").encode("latin-1"), JSON_TYPE),
    # UTF-8's bytes for a surrogate itself (CESU-8), which Python's parser decodes with surrogatepass.
    "surrogate-bytes": (TEXT.replace("\\ud800", "\ud800").encode("utf-8", "surrogatepass"), JSON_TYPE),
    "utf-16-declared": (TEXT.encode("utf-16"), [("content-type", "application/json; charset=utf-16")]),
    "vendor-json": (TEXT.encode("utf-16-le"), [("content-type", "application/vnd.api+json")]),
}
TWO_TYPES = {
    "json-then-text": [("content-type", "application/json"), ("content-type", "text/plain")],
    "text-then-json": [("content-type", "text/plain"), ("content-type", "application/json")],
    "json-twice": [("content-type", "application/json"), ("content-type", "application/json")],
}
# A lone surrogate in UTF-8 JSON: refused naming where it was found.
NESTED = {
    "messages.0.content": b'{"messages": [{"role": "user", "content": "a \\ud800 b"}], "model": "m"}',
    "input.1": b'{"input": ["fine", "\\udc00"], "model": "m"}',
    "metadata.a.b": b'{"metadata": {"a": {"b": "\\udfff\\ud800"}}}',
    "\\ud800": b'{"\\ud800": 1}',  # a key: named escaped, never echoed as the surrogate itself
}
GATE_CODES = {"json_not_utf8", "content_type_repeated", "invalid_json"}


def post_routes(app) -> list[str]:
    """Every POST route the app documents, path parameters filled in."""
    return sorted(re.sub(r"\{\w+\}", "fake-model", path) for path, operations in app.openapi()["paths"].items()
                  if "post" in operations)


@asynccontextmanager
async def backend():
    # Its lifespan (which loads the models) does not run: the gate answers before any route would need one.
    app = backend_app(TorchServeSettings().backend())
    app.include_router(torchserve_router)  # the TorchServe front's /predictions, on the same gate
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http, post_routes(app)


@asynccontextmanager
async def llm():
    sent = []
    app = llm_app(LLMSettings(llm_endpoint="http://10.1.2.3:8008", llm_model="m"),
                  transport=httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200, json={})))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            yield http, post_routes(app)
    assert not sent, "a refused body reached the backend"


@asynccontextmanager
async def embedding():
    app = embedding_app(EmbeddingSettings())
    asked = []
    app.state.service = SimpleNamespace(**{name: lambda *args, **_: asked.append(args) for name in (
        "openai_embeddings", "tei_embeddings", "rerank_results", "tei_rerank_results")})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http, post_routes(app)
    assert not asked, "a refused body reached the model"


@asynccontextmanager
async def chatqna(tmp_path):
    async with gateway(tmp_path) as http:
        yield http, post_routes(http._transport.app)


SERVICES = {"backend": backend, "llm": llm, "embedding": embedding, "gateway": chatqna}


@asynccontextmanager
async def service(name, tmp_path):
    factory = SERVICES[name]
    async with (factory(tmp_path) if name == "gateway" else factory()) as (http, routes):
        assert routes, name
        yield http, routes


def assert_refused(reply: httpx.Response, code: str, param: str | None = None) -> None:
    assert reply.status_code == 400, (reply.request.url.path, reply.text)
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["code"] == code, (reply.request.url.path, error)
    if param is not None:
        assert error["param"] == param, (reply.request.url.path, error)


@pytest.mark.parametrize("name", SERVICES)
async def test_json_that_is_not_utf8_is_refused_on_every_route(name, tmp_path):
    async with service(name, tmp_path) as (http, routes):
        for path in routes:
            for encoding, (content, headers) in ENCODINGS.items():
                reply = await http.post(path, content=content, headers=headers)
                assert_refused(reply, "json_not_utf8")
                assert "UTF-8" in reply.json()["error"]["message"], encoding


@pytest.mark.parametrize("name", SERVICES)
async def test_two_content_types_are_refused_on_every_route(name, tmp_path):
    """The gate and the framework must read the same one: with two, each could read another."""
    big = json.dumps({"messages": [{"role": "user", "content": "x" * (5 * 1024 * 1024)}]}).encode()
    async with service(name, tmp_path) as (http, routes):
        for path in routes:
            for headers in TWO_TYPES.values():
                assert_refused(await http.post(path, content=TEXT.encode(), headers=headers), "content_type_repeated")
            reply = await http.post(path, content=big, headers=TWO_TYPES["json-then-text"])
            assert reply.status_code in (400, 413), (path, reply.status_code)


@pytest.mark.parametrize("name", SERVICES)
async def test_a_lone_surrogate_is_refused_naming_where_it_is(name, tmp_path):
    async with service(name, tmp_path) as (http, routes):
        for path in routes:
            for where, content in NESTED.items():
                for content_type in ("application/json", "application/vnd.api+json",
                                     "Application/JSON; charset=utf-16"):
                    reply = await http.post(path, content=content, headers={"content-type": content_type})
                    assert_refused(reply, "invalid_json", param=where)
                    assert "unpaired surrogate" in reply.json()["error"]["message"]


async def test_the_llm_relay_parses_every_body_as_json_by_the_same_rules():
    """It reads a body as JSON whatever its Content-Type (OPEA's clients do not always send one)."""
    async with llm() as (http, routes):
        for path in routes:
            for content_type in ("text/plain", "application/x-www-form-urlencoded"):
                headers = {"content-type": content_type}
                assert_refused(await http.post(path, content=TEXT.encode("utf-16"), headers=headers), "json_not_utf8")
                reply = await http.post(path, content=NESTED["messages.0.content"], headers=headers)
                assert_refused(reply, "invalid_json", param="messages.0.content")


async def test_utf8_json_still_reaches_the_route():
    """A charset parameter has no effect on JSON (RFC 8259, section 11): the bytes are read as UTF-8, as the
    framework reads them."""
    body = '{"model": "m", "prompt": "café \U0001f600 \\ud83d\\ude00"}'.encode()  # a pair of escapes is fine
    sent = []
    app = llm_app(LLMSettings(llm_endpoint="http://10.1.2.3:8008"), transport=httpx.MockTransport(
        lambda request: sent.append(json.loads(request.content)) or httpx.Response(200, json={})))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            for content_type in ("application/json", "application/json; charset=utf-16", "text/plain"):
                reply = await http.post("/v1/completions", content=body, headers={"content-type": content_type})
                assert reply.status_code == 200, reply.text
    assert [request["prompt"] for request in sent] == ["café \U0001f600 \U0001f600"] * 3


async def test_a_json_form_field_is_parsed_by_the_same_rules(tmp_path):
    """OPEA's link_list is JSON inside a form, which no middleware reads: a lone surrogate in a link was a 500."""
    async with gateway(tmp_path) as http:
        for link_list in ('["http://127.0.0.1:9/\\ud800"]', '["http://\\udc00.example/"]'):
            reply = await http.post("/v1/dataprep/ingest", data={"link_list": link_list})
            assert_refused(reply, "invalid_json", param="link_list")
            assert "at '0'" in reply.json()["error"]["message"]
