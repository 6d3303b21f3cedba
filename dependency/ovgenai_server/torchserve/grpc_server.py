"""TorchServe's gRPC inference API (`org.pytorch.serve.grpc.inference.InferenceAPIsService`) on the same engine.

Only streaming generation is offered, as the LLM-API does: `StreamPredictions` streams the text and then the
end-of-stream token. Unlike TorchServe, whose gRPC path runs batch size 1, each stream joins the engine's continuous
batch like any HTTP request. A client that goes away cancels its stream, which aborts the generation.
"""

from __future__ import annotations

import hmac
import json
import logging

import grpc
from google.protobuf import empty_pb2

from ovgenai_common.clients import client_id, key_digest
from ovgenai_common.errors import APIError, ErrorKind

from ..state import ServerState
from .http import timed
from .proto import inference_pb2, inference_pb2_grpc
from .requests import from_bytes, generate, ping_status, prepare, response_timeout
from .settings import TorchServeSettings

logger = logging.getLogger(__name__)

STATUS_OF = {
    ErrorKind.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.OVERLOADED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
}


class InferenceService(inference_pb2_grpc.InferenceAPIsServiceServicer):
    def __init__(self, state: ServerState, settings: TorchServeSettings):
        self.state = state
        self.settings = settings

    async def Ping(self, request: empty_pb2.Empty, context: grpc.aio.ServicerContext):  # noqa: N802, ARG002
        return inference_pb2.TorchServeHealthResponse(health=json.dumps({"status": ping_status(self.state)}))

    async def Predictions(self, request, context: grpc.aio.ServicerContext):  # noqa: N802, ARG002
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            "This server generates text as a stream only: call StreamPredictions.")

    async def StreamPredictions2(self, request_iterator, context: grpc.aio.ServicerContext):  # noqa: N802, ARG002
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "StreamPredictions2 is not offered: call StreamPredictions.")

    async def StreamPredictions(self, request, context: grpc.aio.ServicerContext):  # noqa: N802
        try:
            prep = await prepare(self.state, self.settings, request.model_name, from_bytes(request.input),
                                 _client(context, self.settings.api_key))
        except APIError as error:
            await context.abort(STATUS_OF.get(error.kind, grpc.StatusCode.INTERNAL), error.message)
        stream = timed(generate(self.state, self.settings, prep),
                       response_timeout(prep.model.facts.folder, self.settings))
        try:
            async for text in stream:
                yield inference_pb2.PredictionResponse(prediction=text.encode())
        except APIError as error:  # the engine failed mid-stream
            await context.abort(STATUS_OF.get(error.kind, grpc.StatusCode.INTERNAL), error.message)


def _client(context: grpc.aio.ServicerContext, api_key: str | None) -> str:
    """Who is asking, as the HTTP routes tell it (ovgenai_common/clients.py): the key the interceptor let it in with,
    or its address."""
    peer = context.peer() or ""  # "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000"
    return client_id(key_digest(api_key.encode()) if api_key else None,
                     peer.split(":", 1)[-1].rsplit(":", 1)[0].strip("[]"))


class APIKeyInterceptor(grpc.aio.ServerInterceptor):
    """The backend's API key, as gRPC metadata `authorization: Bearer <key>`; Ping stays open for probes."""

    # (request streaming, response streaming) -> the handler kind a refusal must take for that method
    HANDLERS = {
        (False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler,
    }

    def __init__(self, api_key: str):
        self.expected = f"Bearer {api_key}".encode()

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        if handler is None or details.method.endswith("/Ping") or hmac.compare_digest(
                given.encode() if isinstance(given, str) else given, self.expected):
            return handler

        async def deny(_request, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "Invalid or missing API key.")

        make = self.HANDLERS[(handler.request_streaming, handler.response_streaming)]
        return make(deny, request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)


async def start_grpc(state: ServerState, settings: TorchServeSettings) -> tuple[grpc.aio.Server, int]:
    """The started server and the port it bound (0 in the settings asks for a free one)."""
    interceptors = [APIKeyInterceptor(settings.api_key)] if settings.api_key else []
    server = grpc.aio.server(interceptors=interceptors,
                             options=[("grpc.max_receive_message_length", settings.max_request_size),
                                      ("grpc.max_send_message_length", settings.max_response_size)])
    inference_pb2_grpc.add_InferenceAPIsServiceServicer_to_server(InferenceService(state, settings), server)
    host = settings.backend().host
    bound = server.add_insecure_port(f"{'[::]' if host in ('0.0.0.0', '::') else host}:{settings.grpc_inference_port}")
    await server.start()
    logger.info("TorchServe gRPC inference API on port %d", bound)
    return server, bound
