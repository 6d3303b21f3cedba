"""TorchServe's gRPC inference API (torchserve/grpc_server.py): the service's methods called as gRPC calls them,
with a stand-in context (refusals abort with the status of their kind), and the API key interceptor's decisions; one
test on a real gRPC server (system)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import grpc
import pytest
from google.protobuf import empty_pb2

from ovgenai_common.errors import ErrorKind
from ovgenai_server.engine.contract.types import EngineState
from ovgenai_server.torchserve.grpc_server import STATUS_OF, APIKeyInterceptor, InferenceService
from ovgenai_server.torchserve.proto import inference_pb2
from ovgenai_server.torchserve.settings import TorchServeSettings
from tests.ovgenai_server.torchserve.front import EOS
from tests.support.fake_engine import FakeRuntime, fake_model, fake_state

SERVICE = "/org.pytorch.serve.grpc.inference.InferenceAPIsService"


class Aborted(Exception):
    pass


class Context:
    """A servicer context whose abort ends the call, as gRPC's does."""

    def __init__(self) -> None:
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def invocation_metadata(self) -> tuple:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise Aborted


def service(runtime: FakeRuntime | None = None) -> InferenceService:
    return InferenceService(fake_state(fake_model(runtime)), TorchServeSettings())


def request(model: str = "fake-model", **values: bytes) -> inference_pb2.PredictionsRequest:
    return inference_pb2.PredictionsRequest(model_name=model, input=values)


async def streamed(inference: InferenceService, call: inference_pb2.PredictionsRequest, context: Context) -> list[str]:
    return [reply.prediction.decode() async for reply in inference.StreamPredictions(call, context)]


async def test_a_stream_is_the_text_then_the_end_token():
    assert await streamed(service(), request(text=b"hi"), Context()) == ["Hello", ",", " world", EOS]


@pytest.mark.parametrize(("call", "code"), [
    (request(), grpc.StatusCode.INVALID_ARGUMENT),
    (request(text=b"hi", beams=b"2"), grpc.StatusCode.INVALID_ARGUMENT),
    (request("other", text=b"hi"), grpc.StatusCode.NOT_FOUND),
])
async def test_a_refused_request_aborts_with_the_status_of_its_kind(call, code):
    context = Context()
    with pytest.raises(Aborted):
        await streamed(service(), call, context)
    assert context.aborted[0] == code


async def test_a_loading_model_is_unavailable_and_a_failure_mid_stream_aborts_it():
    context = Context()
    with pytest.raises(Aborted):
        await streamed(service(FakeRuntime(state=EngineState.LOADING)), request(text=b"hi"), context)
    assert context.aborted[0] == grpc.StatusCode.UNAVAILABLE
    runtime, context = FakeRuntime(fail_after=1), Context()
    with pytest.raises(Aborted):
        await streamed(service(runtime), request(text=b"hi"), context)
    assert context.aborted[0] == grpc.StatusCode.UNAVAILABLE and runtime.active == 0


def test_each_refusal_kind_has_its_grpc_status():
    assert STATUS_OF[ErrorKind.OVERLOADED] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert STATUS_OF.get(ErrorKind.INTERNAL, grpc.StatusCode.INTERNAL) == grpc.StatusCode.INTERNAL


async def test_ping_says_the_health_word_and_unary_calls_are_not_offered():
    reply = await service(FakeRuntime(state=EngineState.LOADING)).Ping(empty_pb2.Empty(), Context())
    assert json.loads(reply.health) == {"status": "Unhealthy"}
    for method in ("Predictions", "StreamPredictions2"):
        context = Context()
        with pytest.raises(Aborted):
            await getattr(service(), method)(request(text=b"hi"), context)
        assert context.aborted[0] == grpc.StatusCode.UNIMPLEMENTED and "StreamPredictions" in context.aborted[1]


async def _stream(_request, _context):
    yield b""


def intercepted(method: str, metadata: tuple = ()):
    handler = grpc.unary_stream_rpc_method_handler(_stream)

    async def continuation(_details):
        return handler

    details = SimpleNamespace(method=f"{SERVICE}/{method}", invocation_metadata=metadata)
    return handler, APIKeyInterceptor("secret").intercept_service(continuation, details)


@pytest.mark.parametrize(("method", "metadata"), [
    ("StreamPredictions", (("authorization", "Bearer secret"),)),
    ("StreamPredictions", (("authorization", b"Bearer secret"),)),
    ("Ping", ()),  # open to probes
])
async def test_the_right_key_or_a_probe_reaches_the_method(method, metadata):
    handler, decided = intercepted(method, metadata)
    assert await decided is handler


@pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer wrong"),), (("authorization", "secret"),)])
async def test_a_missing_or_wrong_key_is_unauthenticated_in_the_methods_own_shape(metadata):
    handler, decided = intercepted("StreamPredictions", metadata)
    denied = await decided
    assert denied is not handler and (denied.request_streaming, denied.response_streaming) == (False, True)
    context = Context()
    with pytest.raises(Aborted):
        await denied.unary_stream(None, context)
    assert context.aborted[0] == grpc.StatusCode.UNAUTHENTICATED


async def test_an_unknown_method_is_left_to_grpc():
    async def continuation(_details):
        return None

    details = SimpleNamespace(method=f"{SERVICE}/Nothing", invocation_metadata=())
    assert await APIKeyInterceptor("secret").intercept_service(continuation, details) is None
