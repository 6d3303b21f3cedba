"""What a stop string costs a stream: the time to the first text and the chunks it arrives in, with and without one.

Starts the backend on the default model (and, with `--before CHECKOUT`, the same from another checkout of this
repository, a git worktree at an earlier commit) and streams `--requests` greedy chat answers of `--tokens` tokens
(`ignore_eos`) one after another, alternating between a request without `stop` and the same with a stop string the
answer never holds, so that both stream the same tokens. openvino-genai holds a stream back by the stop strings'
length in tokens when it is told them; a server that finds them in the text itself streams every token as it comes.
Prints each server's median time to the first text and to the last, and the content chunks per answer.

usage: bench/stop_strings.py [--before ../before] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: bench/ is a package of the repository
    sys.path.insert(0, str(ROOT))

from bench.servers import service  # noqa: E402
from ovgenai_common.cpu import cpu_flags  # noqa: E402

MODEL = ROOT / "models" / "HuggingFaceTB" / "SmolLM2-135M-Instruct"
NAME = "m"
QUESTION = [{"role": "user", "content": "Describe a lighthouse at night."}]
NEVER = "\n\n### Unfinished business ###"  # a stop string of several tokens the answers never hold


def stream(url: str, tokens: int, stop: list[str] | None) -> dict[str, float]:
    body = {"model": NAME, "messages": QUESTION, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, **({"stop": stop} if stop else {})}
    start, first, chunks = time.perf_counter(), None, 0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:])["choices"]
            if choices and choices[0]["delta"].get("content"):
                chunks += 1
                first = first if first is not None else time.perf_counter()
    end = time.perf_counter()
    assert first is not None, "no text streamed"
    return {"first_ms": (first - start) * 1000, "last_ms": (end - start) * 1000, "chunks": chunks}


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--requests", type=int, default=20, help="of each kind, per server")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--before", type=Path, metavar="CHECKOUT", help="also serve from this checkout, as 'before'")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    checkouts = {"this checkout": None, **({"before": args.before.resolve()} if args.before else {})}
    results: dict[str, dict] = {}
    for label, checkout in checkouts.items():  # one server at a time: the other's threads would share the cores
        with service("ovgenai_server", ["--model", str(args.model), "--served_model_name", NAME],
                     checkout=checkout) as server:
            stream(server.url, 8, None)  # warm-up
            runs: dict[str, list] = {"no stop": [], "stop": []}
            for _ in range(args.requests):
                runs["no stop"].append(stream(server.url, args.tokens, None))
                runs["stop"].append(stream(server.url, args.tokens, [NEVER]))
        results[label] = {kind: summary(kind_runs) for kind, kind_runs in runs.items()}
        for kind, figures in results[label].items():
            print(f"{label:>14}, {kind:>7}: first text {figures['first_ms']:6.1f} ms, "
                  f"last {figures['last_ms']:7.1f} ms, {figures['chunks']:.0f} chunks", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu_flags(), "tokens": args.tokens, "requests": args.requests,
                                         "stop": NEVER, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
