"""TorchServe's gRPC front on a real server: a missing key is refused, Ping stays open."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import empty_pb2

from ovgenai_server.torchserve.grpc_server import start_grpc
from ovgenai_server.torchserve.proto import inference_pb2, inference_pb2_grpc
from tests.ovgenai_server.torchserve.front import EOS, front
from tests.support.fake_engine import FakeRuntime


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
            assert "Healthy" in (await stub.Ping(empty_pb2.Empty())).health
    finally:
        await server.stop(0)
