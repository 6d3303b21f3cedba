"""`make bench-routing`: prefix-aware routing against round robin, over backend replicas of one model.

Starts N backend replicas (cold) and the LLM microservice in front of them, once per policy, and streams the same
chat workload through it: several tenants, each with a long system prompt of its own, asking short questions in
turn (the shape of RAG and assistant traffic). Round robin sends each tenant's requests to every replica, so each
replica computes each system prompt; prefix routing keeps a tenant on one replica, where its prompt is cached.
Prints TTFT and throughput per policy and their ratio, measured side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peer_workloads import shared_system_prompt  # noqa: E402
from bench.servers import service  # noqa: E402
from bench.stats import RequestTiming, percentile  # noqa: E402


def approximate_tokens(text: str) -> int:
    return len(text.split()) * 4 // 3  # English prose: about 4 tokens for 3 words


def workload(tenants: int, per_tenant: int, system_tokens: int, seed: int = 0) -> list[list[dict]]:
    """Every tenant's conversations in a seeded random order (a fixed interleaving could line tenants up with
    round robin's turns, which would put each tenant on one replica by accident)."""
    conversations = [conversation for tenant in range(tenants)
                     for conversation in shared_system_prompt(approximate_tokens, per_tenant, system_tokens,
                                                              seed=tenant)]
    random.Random(seed).shuffle(conversations)
    return conversations


async def stream_one(client: httpx.AsyncClient, url: str, model: str, messages: list[dict],
                     tokens: int) -> RequestTiming:
    body = {"model": model, "messages": messages, "max_tokens": tokens, "ignore_eos": True, "temperature": 0,
            "stream": True}
    timing = RequestTiming(time.perf_counter())
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"content"' in line:
                timing.token_times.append(time.perf_counter())
    timing.tokens = len(timing.token_times)
    return timing


async def run(url: str, model: str, conversations: list[list[dict]], concurrency: int, tokens: int):
    semaphore = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=600) as client:
        async def limited(messages):
            async with semaphore:
                return await stream_one(client, url, model, messages, tokens)

        start = time.perf_counter()
        timings = await asyncio.gather(*(limited(messages) for messages in conversations))
        return timings, time.perf_counter() - start


def measure(policy: str, args, conversations) -> dict:
    env = {"VLLM_OPENVINO_KVCACHE_SPACE": str(args.kv_cache_gb)}
    replicas = [service("ovgenai_server", ["--model", args.model], env=env).start() for _ in range(args.replicas)]
    try:
        llm_env = {"LLM_ENDPOINT": ",".join(replica.url for replica in replicas), "LLM_MODEL": args.model_name,
                   "LLM_ROUTING": policy}
        llm = service("ovgenai_services.llm", env=llm_env, health_path="/v1/health_check").start()
        try:
            timings, duration = asyncio.run(run(llm.url, args.model_name, conversations, args.concurrency,
                                                args.output_tokens))
            routed = httpx.get(llm.url + "/metrics").text
        finally:
            llm.stop()
    finally:
        for replica in replicas:
            replica.stop()
    ttfts = [t.ttft * 1000 for t in timings]
    per_replica = [line.split()[-1] for line in routed.splitlines()
                   if line.startswith("opea_llm_replica_requests_total{")]
    return {"policy": policy, "requests": len(timings), "duration_s": duration,
            "output_tokens_per_s": sum(t.tokens for t in timings) / duration,
            "ttft_ms_median": statistics.median(ttfts), "ttft_ms_p99": percentile(ttfts, 99),
            "requests_per_replica": per_replica}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "models"))
    parser.add_argument("--model-name", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--per-tenant", type=int, default=3)
    parser.add_argument("--system-tokens", type=int, default=600)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--kv-cache-gb", type=float, default=1.0)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    conversations = workload(args.tenants, args.per_tenant, args.system_tokens)
    results = [measure(policy, args, conversations) for policy in ("round_robin", "prefix")]
    for result in results:
        print(f"{result['policy']:<12} {result['requests']} requests in {result['duration_s']:.1f} s: "
              f"{result['output_tokens_per_s']:.1f} tok/s, TTFT median {result['ttft_ms_median']:.0f} ms, "
              f"p99 {result['ttft_ms_p99']:.0f} ms, requests per replica {result['requests_per_replica']}")
    rr, prefix = results
    print(f"prefix / round robin: TTFT median {prefix['ttft_ms_median'] / rr['ttft_ms_median']:.2f}x, "
          f"p99 {prefix['ttft_ms_p99'] / rr['ttft_ms_p99']:.2f}x, "
          f"throughput {prefix['output_tokens_per_s'] / rr['output_tokens_per_s']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"workload": vars(args) | {"model": "(path)", "json": None},
                                         "results": results}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
