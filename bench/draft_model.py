"""Speculative decoding with a draft model, this backend beside llama.cpp on the same GGUF pair, one stream.

The pairs are derived from the default model's weights (SmolLM2-135M-Instruct, the Q4_1 GGUF), with no hub:
  - target F16 (the Q4_1 weights dequantized: the same function, 2.8× the bytes per token) with the same weights as
    a draft, in Q8_0 (symmetric: every reader decodes it exactly, so the draft guesses nearly every token) and in
    Q4_1 (the file itself: openvino-genai's reader rounds each group's minimum, so its draft is a slightly other
    model than the target; llama.cpp decodes it exactly): the most a draft can gain at this size;
  - target Q4_1 (the default) with a draft of its first `--layers` blocks (the file cut short: its final norm and
    output head kept), a cheaper and worse guesser.
Each server is started for each pair (and for each target alone), one after the other, and answers the same
completions one at a time: greedy, `--tokens` tokens each (`ignore_eos`), streamed. Inter-token latency is
(last token's arrival − first's) / (tokens − 1). The acceptance rate is what each server reports or shows:
llama.cpp's `draft_n_accepted / draft_n` (its final chunk's timings); here, from the tokens each step streams
(`--num-draft` drafted per step, accepted + 1 sent): (tokens per chunk − 1) / `--num-draft`.

usage: bench/draft_model.py [--layers 16] [--num-draft 4] [--json out.json]   (bench/build_llama_server.sh first)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.hf_model import default_gguf  # noqa: E402
from bench.realistic_models import llama_cpp_home, llama_cpu_args  # noqa: E402
from bench.servers import Server  # noqa: E402
from ovgenai_common.cpu import cpu_flags  # noqa: E402

WORK = Path.home() / ".cache" / "ovgenai-bench" / "draft"
PROMPTS = [
    "The history of the lighthouse begins in the ancient world, where",
    "To bake a simple loaf of bread, you will need flour, water, salt and yeast. First,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Photosynthesis is the process by which green plants",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
]


def gguf_module():
    """llama.cpp's gguf package, as bench/build_llama_server.sh copies it beside its converter."""
    sys.path.insert(0, str(llama_cpp_home() / "convert" / "gguf-py"))
    import gguf

    return gguf


def rewrite(source: Path, out: Path, blocks: int | None = None, dtype: str | None = None) -> Path:
    """`source` with only its first `blocks` blocks, or with every quantized tensor as `dtype` (F16 or Q8_0)."""
    if out.is_file():
        return out
    gguf = gguf_module()
    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(out) + ".part", arch)
    count_key = gguf.Keys.LLM.BLOCK_COUNT.format(arch=arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = blocks if field.name == count_key and blocks else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    kept = [t for t in reader.tensors
            if blocks is None or not t.name.startswith("blk.") or int(t.name.split(".")[1]) < blocks]
    plain = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
    datas = []
    for tensor in kept:
        data, kind = tensor.data, tensor.tensor_type
        if dtype and kind not in plain:
            weights = gguf.quants.dequantize(data, kind)
            kind = gguf.GGMLQuantizationType[dtype]
            data = weights.astype(np.float16) if dtype == "F16" else gguf.quants.quantize(weights, kind)
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, kind)
        datas.append(data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in datas:
        writer.write_tensor_data(data)
    writer.close()
    os.replace(str(out) + ".part", out)
    return out


def stream(url: str, model: str, prompt: str, tokens: int) -> dict:
    """One greedy completion, streamed: inter-token latency, tokens, chunks with text, llama.cpp's draft timings."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    arrivals, timings, usage = [], {}, {}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if event.get("choices") and event["choices"][0].get("text"):
                arrivals.append(time.perf_counter())
            timings = event.get("timings") or timings
            usage = event.get("usage") or usage
    produced = usage.get("completion_tokens", tokens)
    return {"itl_ms": (arrivals[-1] - arrivals[0]) / (produced - 1) * 1000, "tokens": produced,
            "chunks": len(arrivals), "draft_n": timings.get("draft_n", 0),
            "draft_accepted": timings.get("draft_n_accepted", 0)}


def command(server: str, target: Path, draft: Path | None, num_draft: int, llama_args: str = "") -> list[str]:
    threads = str(len(os.sched_getaffinity(0)))
    if server == "llama.cpp":
        spec = ["-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(num_draft),
                "--spec-draft-n-min", "0", "-td", threads] if draft else []
        return [str(llama_cpp_home() / "bin" / "llama-server"), "-m", str(target), "--alias", "m", "--host",
                "127.0.0.1", "--port", "{port}", "-np", "1", "-c", "2048", "-t", threads, "-tb", threads,
                "--no-webui", *llama_cpu_args(), *spec, *shlex.split(llama_args)]
    spec = ["--draft_model", str(draft), "--num_speculative_tokens", str(num_draft)] if draft else []
    return [sys.executable, "-m", "ovgenai_server", "--model", str(target), "--served_model_name", "m", "--host",
            "127.0.0.1", "--port", "{port}", "--log_level", "warning", "--enable_prefix_caching", "false", *spec]


def measure(server: str, target: Path, draft: Path | None, args) -> dict:
    with Server(server, command(server, target, draft, args.num_draft, args.llama_args),
                startup_timeout=600) as running:
        stream(running.url, "m", PROMPTS[0], 8)  # warm-up
        runs = [stream(running.url, "m", prompt, args.tokens) for _ in range(args.repeats) for prompt in PROMPTS]
    itl = statistics.median(r["itl_ms"] for r in runs)
    if not draft:
        acceptance = None
    elif server == "llama.cpp":
        drafted = sum(r["draft_n"] for r in runs)
        acceptance = sum(r["draft_accepted"] for r in runs) / drafted if drafted else None
    else:
        per_step = sum(r["tokens"] for r in runs) / sum(r["chunks"] for r in runs)
        acceptance = (per_step - 1) / args.num_draft
    return {"itl_ms": round(itl, 2), "acceptance": None if acceptance is None else round(acceptance, 3),
            "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, default=default_gguf(), help="the default model's Q4_1 GGUF")
    parser.add_argument("--layers", default="16", help="the truncated drafts' block counts (comma-separated)")
    parser.add_argument("--num-draft", type=int, default=4, help="draft tokens per step")
    parser.add_argument("--tokens", type=int, default=96, help="tokens per completion")
    parser.add_argument("--repeats", type=int, default=2, help="times each prompt is sent")
    parser.add_argument("--servers", default="ours,llama.cpp")
    parser.add_argument("--llama-args", default="", help="extra `llama-server` args")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    q4 = args.gguf
    f16 = rewrite(q4, WORK / "target-f16.gguf", dtype="F16")
    q8 = rewrite(q4, WORK / "draft-q8_0.gguf", dtype="Q8_0")
    pairs = [("F16", f16, None, "none"), ("F16", f16, q8, "Q8_0 (same weights)"),
             ("F16", f16, q4, "Q4_1 (same weights)"), ("Q4_1", q4, None, "none")]
    for blocks in map(int, filter(None, args.layers.split(","))):
        cut = rewrite(q4, WORK / f"draft-q4_1-{blocks}-blocks.gguf", blocks=blocks)
        pairs.append(("Q4_1", q4, cut, f"Q4_1, first {blocks} blocks"))
    results = []
    for target_name, target, draft, draft_name in pairs:
        for server in args.servers.split(","):
            result = measure(server, target, draft, args)
            results.append({"server": server, "target": target_name, "draft": draft_name, **result})
            print(f"{server:10s} target {target_name:5s} draft {draft_name:28s} ITL {result['itl_ms']:6.2f} ms  "
                  f"acceptance {result['acceptance']}", flush=True)
    if args.json:
        model, *flags = cpu_flags() or ["unknown"]
        cpu = {"model": model, "cpus": len(os.sched_getaffinity(0)), "flags": flags}
        args.json.write_text(json.dumps({"cpu": cpu, "num_draft": args.num_draft, "tokens": args.tokens,
                                         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
