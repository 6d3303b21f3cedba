"""Calling another service (ovgenai_common/upstream.py): one `/v1` rule, one table from upstream failures to our
errors (never naming the address), one health probe. Upstream answers a
real service gives rarely or never on demand (a 500, a cut connection, a route it lacks), hence httpx's
MockTransport."""

from __future__ import annotations

import httpx
import openai
import pytest

from ovgenai_common.errors import APIError, ErrorKind, error_response
from ovgenai_common.upstream import (
    NotRun,
    Upstream,
    api_base,
    openai_base,
    probe,
    upstream_error,
)

ADDRESS = "http://10.9.8.7:6000"


@pytest.mark.parametrize("url", ["http://svc:9000", "http://svc:9000/", "http://svc:9000/v1", "http://svc:9000/v1/",
                                 " http://svc:9000/v1 "])
def test_one_rule_for_a_v1_suffix(url):
    assert api_base(url) == "http://svc:9000"
    assert openai_base(url) == "http://svc:9000/v1"


def test_a_path_before_v1_is_kept():
    assert openai_base("https://proxy.example/llm/v1") == "https://proxy.example/llm/v1"


def answering(status: int, body: dict | str, headers: dict[str, str] | None = None) -> Upstream:
    def handler(_request: httpx.Request) -> httpx.Response:
        if isinstance(body, dict):
            return httpx.Response(status, json=body, headers=headers)
        return httpx.Response(status, text=body, headers=headers)

    return Upstream("LLM service", ADDRESS, transport=httpx.MockTransport(handler))


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def read_timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


async def failure(upstream: Upstream, stream: bool = False) -> APIError:
    with pytest.raises(APIError) as failed:
        await upstream.request("POST", "/v1/chat/completions", json={}, stream=stream)
    await upstream.aclose()
    return failed.value


MODEL_MISSING = {"error": {"message": "The model 'nope' does not exist.", "type": "not_found_error",
                           "param": "model", "code": "model_not_found"}}


@pytest.mark.parametrize(("status", "body", "kind", "passed"), [
    (400, {"error": {"message": "'top_p' must be > 0.", "param": "top_p", "code": None}}, ErrorKind.INVALID_REQUEST,
     True),
    (401, {"error": {"message": "Incorrect API key.", "code": "invalid_api_key"}}, ErrorKind.UNAUTHORIZED, True),
    (429, {"error": {"message": "At capacity."}}, ErrorKind.OVERLOADED, True),
    (404, MODEL_MISSING, ErrorKind.NOT_FOUND, True),
    (404, {"detail": "Not Found"}, ErrorKind.UNAVAILABLE, False),  # a route the address lacks: misconfigured
    (503, {"error": {"message": "Loading model"}}, ErrorKind.UNAVAILABLE, False),
    (504, "gateway timeout", ErrorKind.TIMEOUT, False),
    (500, "Internal Server Error", ErrorKind.UPSTREAM, False),
])
@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_answers_map_by_one_rule(status, body, kind, passed, stream):
    error = await failure(answering(status, body), stream)
    assert error.kind is kind
    if passed:  # the upstream judged the request: its status, message, param and code reach the client
        assert error.status == status
        assert error.message == f"The LLM service refused the request: {body['error']['message']}"
        assert (error.param, error.code) == (body["error"].get("param"), body["error"].get("code"))
    else:
        assert error.status == kind.status and "LLM service" in error.message and str(status) in error.message


async def test_an_upstreams_retry_after_reaches_the_client():
    refusal = {"error": {"message": "At capacity: retry in 42 s.", "type": "rate_limit_error"}}
    error = await failure(answering(429, refusal, headers={"Retry-After": "42"}))
    assert error.status == 429 and error_response(error).headers["Retry-After"] == "42"
    assert error_response(await failure(answering(429, refusal))).headers["Retry-After"] == "1"  # none said: ours


@pytest.mark.parametrize(("handler", "kind", "text"), [(refuse, ErrorKind.UNAVAILABLE, "unreachable (ConnectError)"),
                                                       (read_timeout, ErrorKind.TIMEOUT, "timed out")])
async def test_no_answer_is_said_without_the_address(handler, kind, text, caplog):
    error = await failure(Upstream("LLM service", ADDRESS, transport=httpx.MockTransport(handler)))
    assert error.kind is kind and text in error.message and "10.9.8.7" not in error.message
    assert "10.9.8.7" in caplog.text  # the operator still learns where it looked


def raising(error: type[httpx.HTTPError], message: str = "failed"):
    def handler(request: httpx.Request) -> httpx.Response:
        raise error(message, request=request)

    return handler


@pytest.mark.parametrize(("answer", "status", "not_run"), [
    (raising(httpx.ConnectError), 503, True),  # never sent
    (raising(httpx.ConnectTimeout), 503, True),
    (raising(httpx.PoolTimeout), 503, True),  # no pooled connection came free: never sent
    (lambda _: httpx.Response(429, json={"error": {"message": "At capacity."}}), 429, True),  # refused to admit it
    (lambda _: httpx.Response(404, json={"detail": "Not Found"}), 503, True),  # no such route
    (raising(httpx.RemoteProtocolError, "Server disconnected without sending a response."), 502, False),
    (raising(httpx.ReadError, "Connection reset by peer"), 502, False),  # after the body was sent: it may have run
    (raising(httpx.WriteError, "Broken pipe"), 502, False),
    (raising(httpx.ReadTimeout), 504, False),
    (lambda _: httpx.Response(503, json={"error": {"message": "The engine process stopped; please retry."}}), 503,
     False),
    (lambda _: httpx.Response(500, text="boom"), 502, False),
])
async def test_only_a_request_that_certainly_ran_nothing_is_not_run(answer, status, not_run):
    """`NotRun` is the one signal that a request may be sent again (the LLM microservice's replicas go by it)."""
    error = await failure(Upstream("backend", ADDRESS, transport=httpx.MockTransport(answer)))
    assert error.status == status and isinstance(error, NotRun) is not_run, error.message
    assert "10.9.8.7" not in error.message


async def test_openai_client_errors_map_by_the_same_rule():
    """The gateway calls through LangChain's OpenAI clients: their errors carry the httpx answer or cause."""
    async def answer(request: httpx.Request) -> httpx.Response:
        if b"nope" in request.content:
            return httpx.Response(404, json=MODEL_MISSING)
        if b"slow" in request.content:
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(500, text="boom")

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    client = openai.AsyncOpenAI(base_url=ADDRESS + "/v1", api_key="k", max_retries=0, http_client=http)
    outcomes = {}
    for model in ("nope", "slow", "ok"):
        with pytest.raises(openai.OpenAIError) as raised:
            await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        outcomes[model] = upstream_error("LLM service", raised.value)
    await http.aclose()
    assert outcomes["nope"].kind is ErrorKind.NOT_FOUND and outcomes["nope"].code == "model_not_found"
    assert outcomes["slow"].kind is ErrorKind.TIMEOUT
    assert outcomes["ok"].kind is ErrorKind.UPSTREAM and "500" in outcomes["ok"].message
    assert upstream_error("LLM service", ValueError("odd")).kind is ErrorKind.UNAVAILABLE


@pytest.mark.parametrize(("answers", "healthy", "asked"), [
    ({"/health": 200}, True, ["/health"]),
    ({"/v1/health_check": 200}, True, ["/health", "/v1/health_check"]),  # an OPEA service
    ({"/v1/models": 200}, True, ["/health", "/v1/health_check", "/v1/models"]),  # any OpenAI server
    ({"/health": 503}, False, ["/health"]),  # a health route that says no is the answer
    ({}, False, ["/health", "/v1/health_check", "/v1/models"]),
])
async def test_one_health_probe_with_fallbacks(answers, healthy, asked):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(answers.get(request.url.path, 404), json={"error": {"message": "Loading model"}})

    upstream = Upstream("embedding service", ADDRESS + "/v1", transport=httpx.MockTransport(handler))
    ok, reason = await upstream.health()
    await upstream.aclose()
    assert ok is healthy and seen == asked
    if not healthy:
        assert str(answers.get("/health", 404)) in reason


@pytest.mark.parametrize("handler", [refuse, read_timeout, lambda _: httpx.Response(503)])
async def test_health_reasons_do_not_name_the_address(handler, caplog):
    async with httpx.AsyncClient(base_url=ADDRESS, transport=httpx.MockTransport(handler)) as client:
        ok, reason = await probe(client, "LLM service")
    assert not ok and reason and "10.9.8.7" not in reason
    assert "10.9.8.7" in caplog.text
