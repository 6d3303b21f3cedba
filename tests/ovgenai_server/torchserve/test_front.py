"""The TorchServe front's edges, on a fake engine: the API key on every route and on gRPC, a failure mid-stream,
and which setting wins when both TorchServe's and the backend's name are given."""

from __future__ import annotations

import grpc
import httpx
import pytest

from ovgenai_server.app import create_app
from ovgenai_server.torchserve.grpc_server import start_grpc
from ovgenai_server.torchserve.http import management_app, router
from ovgenai_server.torchserve.proto import inference_pb2, inference_pb2_grpc
from ovgenai_server.torchserve.settings import TorchServeSettings
from tests.support.fake_engine import FakeRuntime, fake_model

EOS = "<|endoftext|>"


def front(runtime: FakeRuntime, **values):
    settings = TorchServeSettings(**values)
    app = create_app(settings.backend(), [fake_model(runtime)], routers=[router])
    app.state.torchserve = settings  # as the front's start-up sets it (torchserve/__main__.py)
    return app, settings


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


@pytest.mark.system  # a gRPC server
async def test_grpc_refuses_a_missing_key_and_leaves_ping_open():
    app, settings = front(FakeRuntime(), api_key="secret", grpc_inference_port=0)
    server, port = await start_grpc(app.state.server, settings)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = inference_pb2_grpc.InferenceAPIsServiceStub(channel)
            request = inference_pb2.PredictionsRequest(model_name="fake-model", input={"text": b"hi"})
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                async for _ in stub.StreamPredictions(request):
                    pass
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            texts = [r.prediction.decode() async for r in stub.StreamPredictions(
                request, metadata=(("authorization", "Bearer secret"),))]
            assert "".join(texts) == "Hello, world" + EOS and texts[-1] == EOS
            from google.protobuf import empty_pb2

            assert "Healthy" in (await stub.Ping(empty_pb2.Empty())).health
    finally:
        await server.stop(0)


def test_torchserves_names_win_then_the_backends_then_torchserves_defaults():
    assert TorchServeSettings().backend().port == 8080
    assert TorchServeSettings(port=9000, max_request_bytes=4096).backend().port == 9000
    assert TorchServeSettings(port=9000, max_request_bytes=4096).backend().max_request_bytes == 4096
    both = TorchServeSettings(port=9000, inference_address="http://127.0.0.1:9100", max_request_size=8192,
                              max_request_bytes=4096).backend()
    assert (both.host, both.port, both.max_request_bytes) == ("127.0.0.1", 9100, 8192)
