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
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu_time import CpuMeter  # noqa: E402
from bench.in_process import run_in_process  # noqa: E402
from bench.servers import service  # noqa: E402
from bench.stats import RequestTiming, percentile, print_summary, summarize  # noqa: E402
from bench.workload import make_workload  # noqa: E402
from ovgenai_server.engine.api_process.placement import cpu_quota, plan, usable_cores  # noqa: E402
from ovgenai_server.engine.engine_process.autotune import cpu_signature  # noqa: E402
from ovgenai_server.settings import BackendSettings  # noqa: E402


def _core_list(text: str) -> tuple[int, ...]:
    """ "0-13" or "0-5,8" -> the cores, as taskset takes them."""
    cores: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cores.update(range(int(first), int(last or first) + 1))
    return tuple(sorted(cores))


@contextlib.contextmanager
def _affinity(cores: tuple[int, ...] | None):
    """This thread (and what it starts: the health probe, the client's resolver threads) on `cores` for the block;
    the in-process runs between blocks get the cores under test back."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


async def _stream_one(client: httpx.AsyncClient, url: str, model: str, request) -> RequestTiming:
    body = {"model": model, "prompt": request.prompt_ids, "max_tokens": request.output_tokens,
            "ignore_eos": True, "temperature": 0, "stream": True}
    timing = RequestTiming(time.perf_counter())
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            # Token chunks are the ones without a finish reason; no JSON parsing, so that the client (which
            # shares the 2 cores with the server) costs as little as possible.
            if line.startswith("data: {") and '"finish_reason":null' in line:
                timing.token_times.append(time.perf_counter())
            elif line.startswith("data: {") and '"error"' in line:
                raise RuntimeError(line)
        timing.tokens = request.output_tokens
    return timing


async def run_http(url: str, model: str, workload, concurrency: int, probe_health: str | None):
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    health_latencies: list[float] = []
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        semaphore = asyncio.Semaphore(concurrency)

        async def limited(request):
            async with semaphore:
                return await _stream_one(client, url, model, request)

        # The probe is a process of its own (bench/health_probe.py): a thread here would wait for this process's
        # GIL behind the event loop parsing every stream, and count the load generator's latency as the server's.
        prober = subprocess.Popen([sys.executable, "-m", "bench.health_probe", probe_health], cwd=ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE) if probe_health else None
        try:
            start = time.perf_counter()
            timings = await asyncio.gather(*(limited(r) for r in workload))
            duration = time.perf_counter() - start
        finally:
            if prober:
                out, _ = prober.communicate()  # closing its stdin stops it
        if prober:
            if prober.returncode != 0:
                raise RuntimeError(f"GET {probe_health} failed under load (see above)")
            health_latencies = json.loads(out)
    return timings, duration, health_latencies


def _median_by_side(rounds: list[dict], figure: str) -> dict[str, float]:
    """{side: the median over the rounds} of a per-side figure of each round."""
    return {side: statistics.median(r[figure][side] for r in rounds) for side in rounds[0][figure]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=str(ROOT / "models"))
    parser.add_argument("--model-name", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=220)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--via-llm", action="store_true", help="also stream through the LLM microservice")
    parser.add_argument("--serving-core", choices=["auto", "reserved", "shared"], default="auto",
                        help="the backend's --serving_core (the in-process engine always has every core under test)")
    parser.add_argument("--server-cores", type=_core_list, default=None, metavar="LIST",
                        help="cores under test, e.g. 0-13: the server and the in-process engine run on these, the "
                        "load generator and the /health probe on the others (as clients on another machine would); "
                        "default: everything shares every core")
    parser.add_argument("--server-autotune", action="store_true",
                        help="the server runs autotune (a fresh sweep, no wait limit) against the in-process "
                        "defaults: the ratio is then what autotune's pick gives as served")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    import openvino_genai

    model_file = Path(args.model) / args.model_name
    tokenizer = openvino_genai.Tokenizer(str(model_file))
    workload = make_workload(
        lambda text: tokenizer.encode(text, add_special_tokens=False).input_ids.data[0].tolist(),
        args.requests, args.prompt_tokens, args.output_tokens, args.seed,
    )
    # The in-process pipeline gets the server's own defaults, so that the two differ only in serving. Prefix caching
    # off on both sides: every round replays the same prompts, and a warm cache would flatter whichever run comes
    # second.
    defaults = BackendSettings()
    scheduler = {"cache_size": round(defaults.cache_size), "max_num_batched_tokens": defaults.max_num_batched_tokens,
                 "max_num_seqs": defaults.max_num_seqs, "dynamic_split_fuse": defaults.dynamic_split_fuse,
                 "enable_prefix_caching": False}
    # No autotune on the server by default: the in-process run has the defaults, so that the two differ only in
    # serving (and no wait limit refuses part of a burst). With --server-autotune the sweep runs afresh (its cache in
    # a folder of this run) and the wait limit is off, so that the whole burst is served.
    sweep_cache = tempfile.TemporaryDirectory(prefix="bench-autotune-") if args.server_autotune else None
    backend_args = ["--model", args.model, "--log_level", "warning", "--enable_prefix_caching", "false",
                    "--serving_core", args.serving_core]
    backend_args += (["--cache_dir", sweep_cache.name, "--max_queue_wait", "0"] if sweep_cache
                     else ["--no-autotune"])
    all_cores = usable_cores()
    server_cores = args.server_cores or all_cores
    client_cores = tuple(c for c in all_cores if c not in server_cores) if args.server_cores else None
    if client_cores == ():
        parser.error("--server-cores must leave the load generator a core")
    placement = plan(server_cores, args.serving_core, cpu_quota())
    print(f"{len(server_cores)} cores under test: {placement.describe()}; load generator on "
          f"{'cores ' + ','.join(map(str, client_cores)) if client_cores else 'the same cores'}", flush=True)
    # The server inherits this thread's cores when it starts; the in-process engine's threads when first made.
    os.sched_setaffinity(0, server_cores)

    def over_http(base_url: str, name: str, processes: dict[str, int], engine: int) -> tuple[dict, list[float]]:
        """The measured workload streamed from `base_url`, the load generator on its cores, /health probed; its
        summary counts the CPU each side spent per output token."""
        with _affinity(client_cores), CpuMeter(processes, {"engine process": engine}) as meter:
            timings, duration, probe = asyncio.run(run_http(base_url + "/v1/completions", args.model_name, workload,
                                                            args.concurrency, base_url + "/health"))
        summary = summarize(name, timings, duration)
        summary["cpu_ms_per_output_token"] = meter.account.per_token_ms(summary["output_tokens"])
        summary["cpu_share_of_all_cores"] = meter.account.share_of(len(all_cores), duration)
        return summary, probe

    runs: dict[str, list[dict]] = {"server": [], "llm": [], "in_process": []}
    health: list[float] = []
    llm_health: list[float] = []
    server_config = None
    with (sweep_cache or contextlib.nullcontext(), service("ovgenai_server", backend_args) as server,
          contextlib.ExitStack() as stack):
        if args.server_autotune:  # what the sweep picked, trials included
            server_config = httpx.get(server.url + "/v1/config", timeout=30).json()
            print(f"server autotune: {json.dumps(server_config)[:2000]}", flush=True)
        llm = None
        if args.via_llm:
            env = {"LLM_ENDPOINT": server.url, "LLM_MODEL": args.model_name, "LOG_LEVEL": "warning"}
            llm = stack.enter_context(service("ovgenai_services.llm", env=env, health_path="/v1/health_check"))
        for url in [server.url] + ([llm.url] if llm else []):  # warm-up: compiled kernels, pooled connections
            asyncio.run(run_http(url + "/v1/completions", args.model_name, workload[:4], 4, None))
        run_in_process(str(model_file), workload[:2], 2, scheduler)
        # Rounds alternate the three ways so that drift on the machine hits them alike; the best round of each
        # is reported (the figure of a quiet machine).
        for _ in range(args.rounds):
            timings, duration = run_in_process(str(model_file), workload, args.concurrency, scheduler)
            runs["in_process"].append(summarize("in-process ContinuousBatchingPipeline", timings, duration))
            backend = {"API process": server.process.pid}
            result, probe = over_http(server.url, "server (HTTP, engine process)", backend, server.process.pid)
            runs["server"].append(result)
            health += probe
            if llm:
                result, probe = over_http(llm.url, "through the LLM microservice",
                                          {**backend, "LLM microservice": llm.process.pid}, server.process.pid)
                runs["llm"].append(result)
                llm_health += probe
    results = {key: max(values, key=lambda r: r["output_tokens_per_s"]) for key, values in runs.items() if values}
    results["health_ms"] = {"p50": percentile(health, 50), "p99": percentile(health, 99), "n": len(health)}
    if llm_health:
        results["llm_health_ms"] = {"p50": percentile(llm_health, 50), "p99": percentile(llm_health, 99),
                                    "n": len(llm_health)}
    results["rounds_output_tokens_per_s"] = {
        key: [round(r["output_tokens_per_s"], 1) for r in values] for key, values in runs.items()
    }

    for key in ("server", "llm", "in_process"):
        if key in results:
            print_summary(results[key])
    # The ratio pairs each round's server run with the in-process run just before it (median over rounds):
    # a shared VM's throughput drifts by +-15% between minutes, far more than the serving overhead.
    pairs = zip(runs["server"], runs["in_process"], strict=True)
    ratio = statistics.median(s["output_tokens_per_s"] / i["output_tokens_per_s"] for s, i in pairs)
    print("============ side by side ============")
    print(f"{'server / in-process output tok/s:':<40}{ratio:>12.3f}")
    if "llm" in results:
        pairs = list(zip(runs["llm"], runs["server"], strict=True))
        llm_ratio = statistics.median(m["output_tokens_per_s"] / s["output_tokens_per_s"] for m, s in pairs)
        itl_delta = statistics.median(m["itl_ms"][1] - s["itl_ms"][1] for m, s in pairs)
        results["ratio_llm_backend"], results["llm_added_median_itl_ms"] = llm_ratio, itl_delta
        print(f"{'LLM microservice / backend tok/s:':<40}{llm_ratio:>12.3f}")
        print(f"{'LLM microservice added median ITL (ms):':<40}{itl_delta:>12.2f}")
    print(f"{'rounds (output tok/s):':<40}{results['rounds_output_tokens_per_s']}")
    print(f"{'backend GET /health under load p50/p99 (ms):':<46}"
          f"{results['health_ms']['p50']:>6.2f} / {results['health_ms']['p99']:.2f}")
    if "llm_health_ms" in results:
        print(f"{'LLM microservice GET /health p50/p99 (ms):':<46}"
              f"{results['llm_health_ms']['p50']:>6.2f} / {results['llm_health_ms']['p99']:.2f}")
    # Where the CPU went (median of the rounds): on shared cores, what the API process and the load generator
    # spend is taken from the engine's inference threads, and bounds the ratio above.
    for key in ("server", "llm"):
        if runs[key]:
            spent, share = (_median_by_side(runs[key], figure)
                            for figure in ("cpu_ms_per_output_token", "cpu_share_of_all_cores"))
            results[f"{key}_cpu"] = {"ms_per_output_token": spent, "share_of_all_cores": share}
            print(f"CPU per output token, {runs[key][0]['name']} (ms, share of the {len(all_cores)} cores):")
            for side in spent:
                print(f"{'  ' + side + ':':<40}{spent[side]:>12.3f}  ({share[side]:.1%})")
    results["ratio_server_in_process"] = ratio
    results["cpu"] = cpu_signature()  # its "cores": those under test
    results["cores_under_test"] = len(server_cores)
    results["placement"] = placement.describe()
    results["load_generator_cores"] = list(client_cores) if client_cores else "the same cores"
    if server_config is not None:
        results["server_config"] = server_config
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
