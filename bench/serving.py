"""`make bench`: the backend server against the in-process pipeline, same workload, side by side.

Streams N concurrent completions (token-id prompts, `ignore_eos`, fixed output length) through the HTTP server,
then runs the same requests on an in-process ContinuousBatchingPipeline at the same concurrency, and prints
vLLM-benchmark_serving-style figures for both and their ratio. While the server is loaded it also probes
`GET /health` to report its latency under load. Optionally (--via-llm) the same load goes through the LLM
microservice too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import RequestTiming, percentile, print_summary, summarize  # noqa: E402
from bench.workload import make_workload  # noqa: E402
from tests.support.servers import RemoteServer  # noqa: E402


async def _stream_one(client: httpx.AsyncClient, url: str, model: str, request) -> RequestTiming:
    body = {"model": model, "prompt": request.prompt_ids, "max_tokens": request.output_tokens,
            "ignore_eos": True, "temperature": 0, "stream": True}
    timing = RequestTiming(time.perf_counter())
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = json.loads(line[6:])["choices"]
            if choice and choice[0]["text"]:
                now = time.perf_counter()
                # A chunk may carry several tokens when the client falls behind; count tokens, not chunks.
                timing.token_times.append(now)
        timing.tokens = request.output_tokens
    return timing


async def run_http(url: str, model: str, workload, concurrency: int, probe_health: str | None):
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    health_latencies: list[float] = []
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        semaphore = asyncio.Semaphore(concurrency)
        done = asyncio.Event()

        async def limited(request):
            async with semaphore:
                return await _stream_one(client, url, model, request)

        async def probe():
            async with httpx.AsyncClient(timeout=10) as probe_client:
                while not done.is_set():
                    start = time.perf_counter()
                    response = await probe_client.get(probe_health)
                    health_latencies.append((time.perf_counter() - start) * 1000)
                    assert response.status_code == 200
                    await asyncio.sleep(0.05)

        prober = asyncio.create_task(probe()) if probe_health else None
        start = time.perf_counter()
        timings = await asyncio.gather(*(limited(r) for r in workload))
        duration = time.perf_counter() - start
        done.set()
        if prober:
            await prober
    return timings, duration, health_latencies


def run_in_process(model_path: str, workload, concurrency: int, scheduler: dict):
    import numpy as np
    import openvino
    import openvino_genai

    config = openvino_genai.SchedulerConfig()
    for key, value in scheduler.items():
        setattr(config, key, value)
    pipeline = openvino_genai.ContinuousBatchingPipeline(model_path, config, "CPU", {})
    pending = list(enumerate(workload))
    active: dict[int, tuple] = {}
    timings: dict[int, RequestTiming] = {}
    start = time.perf_counter()

    def admit():
        while pending and len(active) < concurrency:
            index, request = pending.pop(0)
            generation = openvino_genai.GenerationConfig()
            generation.max_new_tokens = request.output_tokens
            generation.ignore_eos = True
            ids = openvino.Tensor(np.asarray([request.prompt_ids], dtype=np.int64))
            timings[index] = RequestTiming(time.perf_counter())
            active[index] = pipeline.add_request(index, ids, generation)

    admit()
    while active:
        pipeline.step()
        now = time.perf_counter()
        for index, handle in list(active.items()):
            if handle.can_read():
                for output in handle.read().values():
                    if output.generated_ids:
                        timings[index].token_times.append(now)
                        timings[index].tokens += len(output.generated_ids)
            if handle.get_status() != openvino_genai.GenerationStatus.RUNNING:
                del active[index]
        admit()
    duration = time.perf_counter() - start
    return [timings[i] for i in range(len(workload))], duration


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=str(ROOT / "models"))
    parser.add_argument("--model-name", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=220)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--via-llm", action="store_true", help="also stream through the LLM microservice")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    import openvino_genai

    model_file = Path(args.model) / args.model_name / "model.gguf"
    tokenizer = openvino_genai.Tokenizer(str(model_file))
    workload = make_workload(
        lambda text: tokenizer.encode(text, add_special_tokens=False).input_ids.data[0].tolist(),
        args.requests, args.prompt_tokens, args.output_tokens, args.seed,
    )
    scheduler = {"cache_size": 1, "max_num_batched_tokens": 256, "max_num_seqs": 256,
                 "dynamic_split_fuse": True, "enable_prefix_caching": True}
    results = {}
    with RemoteServer("ovgenai_server", ["--model", args.model, "--log_level", "warning"]) as server:
        # Warm-up so both sides start with compiled kernels.
        asyncio.run(run_http(server.url + "/v1/completions", args.model_name, workload[:2], 2, None))
        timings, duration, health = asyncio.run(
            run_http(server.url + "/v1/completions", args.model_name, workload, args.concurrency,
                     server.url + "/health")
        )
        results["server"] = summarize("server (HTTP, engine process)", timings, duration)
        results["health_ms"] = {"p50": percentile(health, 50), "p99": percentile(health, 99), "n": len(health)}
        if args.via_llm:
            env = {"LLM_ENDPOINT": server.url, "LLM_MODEL": args.model_name, "LOG_LEVEL": "warning"}
            with RemoteServer("microservices.llm", env=env) as llm:
                asyncio.run(run_http(llm.url + "/v1/completions", args.model_name, workload[:2], 2, None))
                timings, duration, _ = asyncio.run(
                    run_http(llm.url + "/v1/completions", args.model_name, workload, args.concurrency, None)
                )
                results["llm"] = summarize("through the LLM microservice", timings, duration)
    run_in_process(str(model_file), workload[:2], 2, scheduler)  # warm-up
    timings, duration = run_in_process(str(model_file), workload, args.concurrency, scheduler)
    results["in_process"] = summarize("in-process ContinuousBatchingPipeline", timings, duration)

    for key in ("server", "llm", "in_process"):
        if key in results:
            print_summary(results[key])
    ratio = results["server"]["output_tokens_per_s"] / results["in_process"]["output_tokens_per_s"]
    print("============ side by side ============")
    print(f"{'server / in-process output tok/s:':<40}{ratio:>12.3f}")
    if "llm" in results:
        llm_ratio = results["llm"]["output_tokens_per_s"] / results["server"]["output_tokens_per_s"]
        itl_delta = results["llm"]["itl_ms"][1] - results["server"]["itl_ms"][1]
        print(f"{'LLM microservice / backend tok/s:':<40}{llm_ratio:>12.3f}")
        print(f"{'LLM microservice added median ITL (ms):':<40}{itl_delta:>12.2f}")
    print(f"{'GET /health under load p50/p99 (ms):':<40}"
          f"{results['health_ms']['p50']:>6.2f} / {results['health_ms']['p99']:.2f}")
    results["ratio_server_in_process"] = ratio
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
