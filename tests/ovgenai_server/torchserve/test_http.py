"""TorchServe's HTTP surface (torchserve/http.py), on a fake engine: /predictions takes JSON, a form or the prompt
as plain text; a stream ends at the response timeout (its generation closed) or, without the end token, when the
engine fails; the management app describes each model as TorchServe does, and /ping says Healthy only while every
model is ready. The API key guards all of it but the probes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.torchserve.http import describe_model, management_app, metrics_app, timed
from ovgenai_server.torchserve.settings import TorchServeSettings
from tests.ovgenai_server.torchserve.front import EOS, front
from tests.support.fake_engine import FakeRuntime


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_a_prompt_comes_as_json_a_form_or_the_body_itself():
    runtime = FakeRuntime()
    app, _ = front(runtime)
    async with client(app) as http:
        as_json = await http.post("/predictions/fake-model", json={"text": "one two", "max_new_tokens": 2})
        as_form = await http.post("/predictions/fake-model", data={"text": "one two three", "max_new_tokens": "1"})
        as_text = await http.post("/predictions/fake-model", content=b"four five six seven",
                                  headers={"content-type": "text/plain"})
        # JSON told as the body gate and FastAPI tell it: any case, a +json subtype (it was the prompt itself)
        cased = await http.post("/predictions/fake-model", content=b'{"text": "eight", "max_new_tokens": 1}',
                                headers={"content-type": "Application/JSON; charset=utf-8"})
    assert [r.text for r in (as_json, as_form, as_text, cased)] == [
        "Hello," + EOS, "Hello" + EOS, "Hello, world" + EOS, "Hello" + EOS]
    assert [len(prompt) for prompt, _ in runtime.calls] == [2, 3, 4, 1]


@pytest.mark.parametrize(("body", "headers", "reason"), [
    (b"{not json", {"content-type": "application/json"}, "not valid JSON"),
    (b'["a list"]', {"content-type": "application/json"}, "must be an object"),
    (b"\xff\xfe", {"content-type": "text/plain"}, "not UTF-8"),
])
async def test_a_body_that_cannot_be_read_is_a_400_saying_why(body, headers, reason):
    app, _ = front(FakeRuntime())
    async with client(app) as http:
        reply = await http.post("/predictions/fake-model", content=body, headers=headers)
    assert reply.status_code == 400 and reason in reply.json()["error"]["message"]


async def test_a_file_in_a_form_is_refused_naming_its_field():
    app, _ = front(FakeRuntime())
    async with client(app) as http:
        reply = await http.post("/predictions/fake-model", data={"text": "hi"}, files={"stop": ("s.txt", b"x")})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "stop"


async def test_ping_is_unhealthy_until_every_model_is_ready():
    runtime = FakeRuntime(state=EngineState.LOADING)
    app, _ = front(runtime)
    async with client(app) as http:
        assert (await http.get("/ping")).json() == {"status": "Unhealthy"}
        assert (await http.get("/ping")).status_code == 500
        runtime.state = EngineState.AVAILABLE
        assert (await http.get("/ping")).json() == {"status": "Healthy"}


def test_a_model_is_described_with_its_batch_and_queue():
    runtime = FakeRuntime()
    app, settings = front(runtime, default_response_timeout=30)
    runtime.active = 5
    [described] = describe_model(app.state.server, settings, "fake-model", None)
    assert (described["modelName"], described["modelVersion"], described["modelUrl"]) == (
        "fake-model", "1.0", "/models/fake-model")
    assert (described["batchSize"], described["responseTimeout"]) == (256, 30)
    assert described["jobQueueStatus"] == {"remainingCapacity": 251, "pendingRequests": 5}
    assert described["workers"][0]["status"] == "READY" and described["workers"][0]["gpu"] is False
    assert describe_model(app.state.server, settings, "fake-model", "all") == [described]
    runtime.state = EngineState.FAILED
    assert describe_model(app.state.server, settings, "fake-model", "1.0")[0]["workers"][0]["status"] == "UNLOADING"


@pytest.mark.parametrize(("model", "version", "param"),
                         [("other", None, "model_name"), ("fake-model", "2.0", "version")])
def test_an_unknown_model_or_version_is_a_404(model, version, param):
    app, settings = front(FakeRuntime())
    with pytest.raises(APIError) as refused:
        describe_model(app.state.server, settings, model, version)
    assert refused.value.kind is ErrorKind.NOT_FOUND and refused.value.param == param


async def test_the_management_app_lists_and_describes_the_models():
    app, settings = front(FakeRuntime())
    async with client(management_app(app.state.server, settings)) as http:
        assert (await http.get("/models")).json() == {"models": [{"modelName": "fake-model",
                                                                  "modelUrl": "/models/fake-model"}]}
        assert (await http.get("/models/fake-model/1.0")).json()[0]["modelName"] == "fake-model"
        assert (await http.get("/models/other")).status_code == 404
        assert (await http.get("/ping")).json() == {"status": "Healthy"}


async def test_the_metrics_app_serves_the_backends_registry():
    registry = CollectorRegistry()
    Counter("ovgenai:probe", "A counter of the test's.", registry=registry).inc()
    async with client(metrics_app(registry, TorchServeSettings())) as http:
        assert "ovgenai:probe_total 1.0" in (await http.get("/metrics")).text


async def test_a_stream_within_its_time_is_passed_on_whole():
    async def three():
        for text in ("a", "b", "c"):
            yield text

    assert [text async for text in timed(three(), 60)] == ["a", "b", "c"]


async def test_the_api_key_guards_predictions_and_management_but_not_probes():
    app, settings = front(FakeRuntime(), api_key="secret")
    key = {"Authorization": "Bearer secret"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        assert (await client.post("/predictions/fake-model", json={"text": "hi"})).status_code == 401
        reply = await client.post("/predictions/fake-model", json={"text": "hi"}, headers=key)
        assert reply.status_code == 200 and reply.text == "Hello, world" + EOS
        assert (await client.get("/ping")).status_code == 200
    management = management_app(app.state.server, settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=management), base_url="http://t") as client:
        assert (await client.get("/models")).status_code == 401
        assert (await client.get("/models", headers=key)).json()["models"][0]["modelName"] == "fake-model"


async def test_a_failure_mid_stream_ends_it_without_the_end_token():
    app, _ = front(FakeRuntime(fail_after=1))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        reply = await client.post("/predictions/fake-model", json={"text": "hi"})
    assert reply.status_code == 200 and reply.text == "Hello"


async def test_the_response_timeout_closes_the_generation():
    closed = asyncio.Event()

    async def endless():
        try:
            while True:
                yield "x"
                await asyncio.sleep(0.01)
        finally:
            closed.set()  # the backend's stream aborts its engine request here

    received = [text async for text in timed(endless(), 0.1)]
    assert received and closed.is_set()
