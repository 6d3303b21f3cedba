"""The TorchServe LLM-API front on the real engine: the deployment guide's HTTP chunk iteration and grpc.aio
examples (adapted to stubs generated here from the project's copy of TorchServe's inference.proto), the management
and metrics ports, the limits and the response timeout."""

from __future__ import annotations

import asyncio
import importlib
import sys

import grpc
import httpx
import pytest

from tests.ovgenai_server.system.helpers import metric
from tests.support.servers import DEFAULT_MODEL, MODELS, ROOT, RemoteServer, free_port, wait_until

EOS = "<|endoftext|>"
NAME = "smollm2"
PROTO = ROOT / "dependency/ovgenai_server/torchserve/proto/inference.proto"


class TorchServe:
    def __init__(self, **env: str):
        self.ports = {name: free_port() for name in ("inference", "management", "metrics", "grpc")}
        self.env = {"MODEL_NAME": NAME, "MODEL_PATH": str(MODELS / DEFAULT_MODEL), "MAX_NEW_TOKENS": "2000",
                    "MAX_INPUT_TOKENS": "3000", "TS_GRPC_INFERENCE_PORT": str(self.ports["grpc"]),
                    **{f"TS_{name.upper()}_ADDRESS": f"http://127.0.0.1:{self.ports[name]}"
                       for name in ("inference", "management", "metrics")}, **env}
        self.url = f"http://127.0.0.1:{self.ports['inference']}"

    def __enter__(self) -> TorchServe:
        self.server = RemoteServer("ovgenai_server.torchserve", env=self.env, health_path="/ping",
                                   port=self.ports["inference"])
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def torchserve(default_model):  # noqa: ARG001 - needs the default model prepared
    with TorchServe() as server:
        yield server


@pytest.fixture(scope="module")
def stubs():
    from ovgenai_server.torchserve.proto import inference_pb2, inference_pb2_grpc

    return inference_pb2, inference_pb2_grpc


# The deployment guide's grpc.aio client, run as a user runs it: its own interpreter, with stubs it generated from
# the proto file (here the project's copy of TorchServe's).
GUIDE_CLIENT = """
import asyncio, sys
import grpc, inference_pb2, inference_pb2_grpc

async def main(port, model, eos):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = inference_pb2_grpc.InferenceAPIsServiceStub(channel)
        request = inference_pb2.PredictionsRequest(
            model_name=model, input={"text": b"The capital of France is", "max_new_tokens": b"16"})
        async for response in stub.StreamPredictions(request):
            text = response.prediction.decode("utf-8")
            print(repr(text))
            if text == eos:
                break

asyncio.run(main(*sys.argv[1:]))
"""


def stream_text(url: str, **payload) -> list[str]:
    """The guide's client: iterate over the response's chunks until the end-of-stream token."""
    chunks = []
    with httpx.stream("POST", f"{url}/predictions/{NAME}", json=payload, timeout=120) as response:
        assert response.status_code == 200, response.read()
        for chunk in response.iter_text():
            chunks.append(chunk)
    return chunks


def test_http_streams_the_text_then_the_end_token_and_nothing_after(torchserve):
    chunks = stream_text(torchserve.url, text="The capital of France is", max_new_tokens=16)
    body = "".join(chunks)
    assert body.endswith(EOS) and body.count(EOS) == 1 and len(body) > len(EOS)
    # Greedy by default, as Hugging Face's generate(): the same text as the OpenAI completion route of this server.
    completion = httpx.post(f"{torchserve.url}/v1/completions", timeout=120, json={
        "model": NAME, "prompt": "The capital of France is", "max_tokens": 16, "temperature": 0}).json()
    assert body[: -len(EOS)] == completion["choices"][0]["text"]


def test_the_guides_aiohttp_client_stops_at_the_end_token(torchserve):
    import aiohttp

    async def client() -> str:
        received = ""
        payload = {"text": "Once upon a time", "max_new_tokens": 12}
        async with aiohttp.ClientSession() as session, session.post(
                f"{torchserve.url}/predictions/{NAME}", json=payload) as response:
            async for chunk in response.content.iter_any():
                received += chunk.decode()
                if received.endswith(EOS):
                    break
        return received

    received = asyncio.run(client())
    assert received.endswith(EOS) and received.count(EOS) == 1 and len(received) > len(EOS)


def test_a_form_payload_with_sampling_parameters(torchserve):
    response = httpx.post(f"{torchserve.url}/predictions/{NAME}", timeout=120,
                          data={"text": "Hello", "do_sample": "true", "temperature": "0.7", "top_p": "0.9",
                                "seed": "3", "max_new_tokens": "8"})
    assert response.status_code == 200 and response.text.endswith(EOS)


@pytest.mark.parametrize(("payload", "param", "words"), [
    ({"inputs_embeds": [[0.1]]}, "inputs_embeds", "text"),
    ({"text": "hi", "max_new_tokens": 2001}, "max_new_tokens", "MAX_NEW_TOKENS (2000)"),
    ({"text": "word " * 3100}, "text", "MAX_INPUT_TOKENS is 3000"),
    ({"text": "hi", "num_beams": 2}, "num_beams", "Unknown"),
    # The backend's own refusals, in this API's names (they said max_tokens and prompt), and MAX_INPUT_TOKENS ahead
    # of the context's limit (a long input with many new tokens was refused for the context).
    ({"text": "hi", "max_new_tokens": 0}, "max_new_tokens", "'max_new_tokens' must be at least 1"),
    ({"text": "word " * 2500, "max_new_tokens": 2000}, "max_new_tokens", "max_new_tokens (2000) plus"),
    ({"text": "word " * 3100, "max_new_tokens": 1500}, "text", "MAX_INPUT_TOKENS is 3000"),
])
def test_bad_input_is_a_400_that_names_the_limit(torchserve, payload, param, words):
    response = httpx.post(f"{torchserve.url}/predictions/{NAME}", json=payload, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and words in error["message"]


def test_an_unknown_model_is_a_404(torchserve):
    assert httpx.post(f"{torchserve.url}/predictions/other", json={"text": "hi"}, timeout=60).status_code == 404


def test_management_and_metrics_ports(torchserve):
    management = f"http://127.0.0.1:{torchserve.ports['management']}"
    assert httpx.get(f"{management}/models").json()["models"][0]["modelName"] == NAME
    described = httpx.get(f"{management}/models/{NAME}").json()[0]
    assert described["modelName"] == NAME and described["workers"][0]["status"] == "READY"
    assert httpx.get(f"{management}/models/absent").status_code == 404
    assert httpx.get(f"{management}/models/{NAME}/1.0").json() == httpx.get(f"{management}/models/{NAME}/all").json()
    assert httpx.get(f"{management}/models/{NAME}/9.9").status_code == 404  # a version never served
    assert httpx.get(f"{management}/ping").json() == {"status": "Healthy"}
    stream_text(torchserve.url, text="Count:", max_new_tokens=4)
    metrics = httpx.get(f"http://127.0.0.1:{torchserve.ports['metrics']}/metrics").text
    assert f'ovgenai:request_success_total{{finished_reason="length",model_name="{NAME}"}}' in metrics


def test_grpc_streams_until_the_end_token_as_the_guides_grpc_aio_client(torchserve, tmp_path):
    import ast
    import subprocess

    from grpc_tools import protoc

    google = importlib.import_module("google.rpc").__path__[0].rsplit("/google/", 1)[0]
    include = importlib.import_module("grpc_tools").__path__[0] + "/_proto"
    assert protoc.main(["protoc", f"-I{PROTO.parent}", f"-I{google}", f"-I{include}", f"--python_out={tmp_path}",
                        f"--grpc_python_out={tmp_path}", str(PROTO)]) == 0
    (tmp_path / "client.py").write_text(GUIDE_CLIENT)
    result = subprocess.run([sys.executable, "client.py", str(torchserve.ports["grpc"]), NAME, EOS], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    texts = [ast.literal_eval(line) for line in result.stdout.splitlines()]
    assert texts[-1] == EOS and EOS not in "".join(texts[:-1])
    http_body = "".join(stream_text(torchserve.url, text="The capital of France is", max_new_tokens=16))
    assert "".join(texts) == http_body


def test_grpc_ping_and_clean_error_statuses(torchserve, stubs):
    inference_pb2, inference_pb2_grpc = stubs
    from google.protobuf import empty_pb2

    async def calls() -> dict:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{torchserve.ports['grpc']}") as channel:
            stub = inference_pb2_grpc.InferenceAPIsServiceStub(channel)
            out = {"ping": (await stub.Ping(empty_pb2.Empty())).health}
            for name, call, request in (
                ("unary", stub.Predictions, inference_pb2.PredictionsRequest(model_name=NAME, input={"text": b"hi"})),
                ("unknown", stub.StreamPredictions, inference_pb2.PredictionsRequest(model_name="x",
                                                                                      input={"text": b"hi"})),
                ("embeds", stub.StreamPredictions, inference_pb2.PredictionsRequest(
                    model_name=NAME, input={"inputs_embeds": b"[0.1]"})),
            ):
                try:
                    result = call(request)
                    if name == "unary":
                        await result
                    else:
                        async for _ in result:
                            pass
                    out[name] = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as error:
                    out[name] = error.code()
            return out

    out = asyncio.run(calls())
    assert '"Healthy"' in out["ping"]
    assert out["unary"] == grpc.StatusCode.UNIMPLEMENTED
    assert out["unknown"] == grpc.StatusCode.NOT_FOUND and out["embeds"] == grpc.StatusCode.INVALID_ARGUMENT


def test_a_grpc_client_that_goes_away_aborts_its_generation(torchserve, stubs):
    inference_pb2, inference_pb2_grpc = stubs

    async def leave_after_first_message() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{torchserve.ports['grpc']}") as channel:
            stub = inference_pb2_grpc.InferenceAPIsServiceStub(channel)
            counting = ", ".join(str(i) for i in range(1, 200)) + ","
            call = stub.StreamPredictions(inference_pb2.PredictionsRequest(
                model_name=NAME, input={"text": counting.encode(), "max_new_tokens": b"2000"}))
            async for _ in call:
                call.cancel()
                break

    asyncio.run(leave_after_first_message())
    # 2,000 tokens would take half a minute; an aborted generation ends at the engine's next step.
    wait_until(lambda: metric(torchserve.url, "ovgenai:num_requests_running", NAME) == 0, 8,
               message="the abandoned generation is aborted")


def test_the_response_timeout_ends_a_long_generation_and_frees_its_cache(default_model):  # noqa: ARG001
    with TorchServe(DEFAULT_RESPONSE_TIMEOUT="1", MAX_NEW_TOKENS="2000") as server:
        stream_text(server.url, text="Warm-up", max_new_tokens=2)
        counting = ", ".join(str(i) for i in range(1, 400)) + ","
        body = "".join(stream_text(server.url, text=counting, max_new_tokens=2000))
        assert not body.endswith(EOS)  # cut short: the client sees the stream end without the token
        wait_until(lambda: metric(server.url, "ovgenai:num_requests_running", NAME) == 0, 30,
                   message="the generation is ended")
        wait_until(lambda: metric(server.url, "ovgenai:kv_cache_usage_perc", NAME) == 0, 30,
                   message="its KV cache is freed")
