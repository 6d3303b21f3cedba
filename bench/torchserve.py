"""The TorchServe front's gRPC streaming beside the same server's SSE streaming: 32 concurrent streams each.

One `python -m ovgenai_server.torchserve` serves both: `StreamPredictions` over gRPC and `/v1/completions` with
`stream: true` over HTTP, the same prompts, greedy, so both produce the same tokens. TorchServe runs its gRPC
streams one at a time (batch size 1); here they join the engine's continuous batch, as the throughput shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

import grpc
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "dependency"))

from bench.servers import Server, free_port  # noqa: E402
from bench.stats import RequestTiming, print_summary, summarize  # noqa: E402
from bench.workload import WORDS  # noqa: E402
from ovgenai_common.cpu import cpu_flags  # noqa: E402
from ovgenai_common.names import DEFAULT_LLM  # noqa: E402
from ovgenai_server.torchserve.proto import inference_pb2, inference_pb2_grpc  # noqa: E402

NAME = "llm"
EOS = "<|endoftext|>"


def prompts(count: int, words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=words)) for _ in range(count)]


async def run(streams, texts: list[str], concurrency: int, count_tokens) -> dict:
    limit = asyncio.Semaphore(concurrency)

    async def one(text: str) -> RequestTiming:
        async with limit:
            timing = RequestTiming(time.perf_counter())
            pieces = []
            async for piece in streams(text):
                timing.token_times.append(time.perf_counter())
                pieces.append(piece)
            timing.tokens = count_tokens("".join(pieces))
            return timing

    start = time.perf_counter()
    timings = await asyncio.gather(*(one(text) for text in texts))
    return timings, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=ROOT / "models")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(args.model / DEFAULT_LLM))

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]) if text else 0

    texts = prompts(args.requests, 200)
    ports = {name: free_port() for name in ("management", "metrics", "grpc")}
    env = {"MODEL_NAME": NAME, "MODEL_PATH": str(args.model / DEFAULT_LLM),
           "TS_GRPC_INFERENCE_PORT": str(ports["grpc"]),
           "TS_MANAGEMENT_ADDRESS": f"http://127.0.0.1:{ports['management']}",
           "TS_METRICS_ADDRESS": f"http://127.0.0.1:{ports['metrics']}"}
    server = Server("torchserve", [sys.executable, "-m", "ovgenai_server.torchserve"], env=env, health_path="/ping")
    server.env["TS_INFERENCE_ADDRESS"] = server.url  # the port the launcher chose

    async def sse(text: str):
        body = {"model": NAME, "prompt": text, "max_tokens": args.output_tokens, "temperature": 0, "stream": True}
        async with sse_client.stream("POST", server.url + "/v1/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    piece = json.loads(line[6:])["choices"][0]["text"]
                    if piece:
                        yield piece

    async def grpc_stream(text: str):
        request = inference_pb2.PredictionsRequest(model_name=NAME, input={
            "text": text.encode(), "max_new_tokens": str(args.output_tokens).encode()})
        async for response in grpc_stub.StreamPredictions(request):
            piece = response.prediction.decode()
            if piece != EOS:
                yield piece

    async def both() -> dict:
        nonlocal sse_client, grpc_stub
        results = {}
        async with httpx.AsyncClient(timeout=600) as sse_client, grpc.aio.insecure_channel(
                f"127.0.0.1:{ports['grpc']}") as channel:
            grpc_stub = inference_pb2_grpc.InferenceAPIsServiceStub(channel)
            for name, streams in (("SSE /v1/completions", sse), ("gRPC StreamPredictions", grpc_stream)) * 2:
                await run(streams, texts[:4], 4, count_tokens)  # warm-up
                timings, duration = await run(streams, texts, args.concurrency, count_tokens)
                results.setdefault(name, []).append(summarize(name, timings, duration))
        return results

    sse_client = grpc_stub = None
    print("CPU:", " ".join(cpu_flags()))
    with server:
        rounds = asyncio.run(both())
    best = {name: max(runs, key=lambda r: r["output_tokens_per_s"]) for name, runs in rounds.items()}
    for result in best.values():
        print_summary(result)
    sse_rate, grpc_rate = (best[n]["output_tokens_per_s"] for n in ("SSE /v1/completions", "gRPC StreamPredictions"))
    print(f"gRPC / SSE output tokens/s: {grpc_rate / sse_rate:.2f} at {args.concurrency} concurrent streams")
    if args.json:
        args.json.write_text(json.dumps({"cpu_flags": cpu_flags(), **best}, indent=2) + "\n")


if __name__ == "__main__":
    main()
