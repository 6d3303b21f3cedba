"""`make bench-tune`: the engine's options swept on one workload in-process, to choose the backend's CPU defaults.

Each configuration runs the same requests (prompts of ~434 tokens, 128 out, 32 in flight by default) on an
in-process ContinuousBatchingPipeline, the ceiling the server reaches within a few per cent. Rounds alternate the
configurations so that drift on the machine hits them alike; the table reports each one's median round and its
ratio to the first configuration measured in the same round.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.in_process import run_in_process  # noqa: E402
from bench.stats import summarize  # noqa: E402
from bench.workload import make_workload  # noqa: E402
from ovgenai_common.cpu import cpu_flags, default_properties  # noqa: E402


def configurations(args) -> list[tuple[str, dict, dict]]:
    """(label, scheduler options, OpenVINO properties) for every combination asked for."""
    out = []
    for tokens, precision, kv in itertools.product(args.batched_tokens, args.precision, args.kv_precision):
        scheduler = {"cache_size": args.cache_size, "max_num_batched_tokens": tokens, "max_num_seqs": 256,
                     "dynamic_split_fuse": True, "enable_prefix_caching": False}
        properties = default_properties("CPU", {}, precision)
        if kv != "default":
            properties["KV_CACHE_PRECISION"] = kv
        out.append((f"batched_tokens={tokens} precision={precision} kv={kv}", scheduler, properties))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=str(ROOT / "models" / "HuggingFaceTB/SmolLM2-135M-Instruct"))
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=434)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cache-size", type=int, default=1, help="KV cache in GB")
    parser.add_argument("--batched-tokens", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--precision", nargs="+", default=["auto"], help="auto f32 bf16 f16")
    parser.add_argument("--kv-precision", nargs="+", default=["default"], help="default u8 f16 f32 ...")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(args.model)
    workload = make_workload(
        lambda text: tokenizer.encode(text, add_special_tokens=False).input_ids.data[0].tolist(),
        args.requests, args.prompt_tokens, args.output_tokens,
    )
    configs = configurations(args)
    print(f"CPU flags: {' '.join(cpu_flags())}")
    run_in_process(args.model, workload[:2], 2, configs[0][1], configs[0][2])  # warm-up: compiled kernels
    rounds: dict[str, list[dict]] = {label: [] for label, _, _ in configs}
    for round_index in range(args.rounds):
        order = configs if round_index % 2 == 0 else configs[::-1]
        for label, scheduler, properties in order:
            timings, duration = run_in_process(args.model, workload, args.concurrency, scheduler, properties)
            result = summarize(label, timings, duration)
            rounds[label].append(result)
            print(f"round {round_index + 1} {label}: {result['output_tokens_per_s']:.1f} out tok/s, "
                  f"TTFT p99 {result['ttft_ms'][2]:.0f} ms", flush=True)
    baseline = configs[0][0]
    print(f"\n{'configuration':<52}{'out tok/s':>10}{'ratio':>8}{'TTFT med':>10}{'TTFT p99':>10}{'ITL med':>9}")
    table = {}
    for label, results in rounds.items():
        ratio = statistics.median(r["output_tokens_per_s"] / b["output_tokens_per_s"]
                                  for r, b in zip(results, rounds[baseline], strict=True))
        median = sorted(results, key=lambda r: r["output_tokens_per_s"])[len(results) // 2]
        table[label] = {"ratio_to_first": ratio, **median}
        print(f"{label:<52}{median['output_tokens_per_s']:>10.1f}{ratio:>8.2f}{median['ttft_ms'][1]:>10.0f}"
              f"{median['ttft_ms'][2]:>10.0f}{median['itl_ms'][1]:>9.1f}")
    if args.json:
        args.json.write_text(json.dumps({"cpu_flags": cpu_flags(), "configurations": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
