"""Does the embedding service's event loop answer while it tokenizes and embeds the largest bodies it takes?

Starts the embedding microservice on the default model (or uses `--url`), sends `--bodies` `/embed` requests at
once, each ~4 MB of JSON (64 passages of ~62,000 characters: just under the 4 MiB body limit), and probes `/live`
every few milliseconds from a process of its own (so that the figure is the server's, not the load generator's
GIL) until every body is answered. Prints the probes' latencies (largest, p99, median), how long the bodies took,
and writes them as JSON with `--json`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: bench/ is a package of the repository
    sys.path.insert(0, str(ROOT))

from bench.servers import service  # noqa: E402
from ovgenai_server.engine.engine_process.autotune import cpu_signature  # noqa: E402

MODEL = ROOT / "models" / "sentence-transformers" / "all-MiniLM-L6-v2"
PASSAGE = "lighthouse keepers count ships " * 2000  # 62,000 characters, ~8,000 tokens: truncated to 256
PASSAGES = 64


def probe(url: str, interval: float) -> int:
    """`GET url` every `interval` s until standard input closes; the latencies (ms) as a JSON list on stdout."""
    import threading

    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    latencies: list[float] = []
    with httpx.Client(timeout=30) as client:
        while not stopped.wait(interval):
            start = time.perf_counter()
            if client.get(url).status_code != 200:
                return 1
            latencies.append((time.perf_counter() - start) * 1000)
    sys.stdout.write(json.dumps(latencies))
    return 0


def measure(url: str, bodies: int, interval: float) -> dict:
    body = json.dumps({"inputs": [PASSAGE] * PASSAGES}).encode()
    prober = subprocess.Popen([sys.executable, __file__, "--probe", url + "/live", "--interval", str(interval)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the probe's own start
    started = time.perf_counter()

    def send(_: int) -> float:
        response = httpx.post(url + "/embed", content=body, headers={"content-type": "application/json"},
                              timeout=600)
        if response.status_code != 200 or len(response.json()) != PASSAGES:
            raise RuntimeError(f"/embed answered {response.status_code}: {response.text[:200]}")
        return time.perf_counter() - started

    with concurrent.futures.ThreadPoolExecutor(bodies) as pool:
        answered = sorted(pool.map(send, range(bodies)))
    out, _ = prober.communicate("")
    latencies = sorted(json.loads(out))
    return {"bodies": bodies, "body_bytes": len(body), "probes": len(latencies),
            "live_ms_max": latencies[-1], "live_ms_p99": latencies[int(0.99 * (len(latencies) - 1))],
            "live_ms_p50": latencies[len(latencies) // 2], "bodies_answered_s": answered}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running embedding service (default: start one on the default model)")
    parser.add_argument("--bodies", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.005, help="seconds between probes")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return probe(args.probe, args.interval)
    if args.url:
        rounds = [measure(args.url, args.bodies, args.interval) for _ in range(args.rounds)]
    else:
        with service("ovgenai_services.embedding", env={"EMBEDDING_MODEL_PATH": str(MODEL)}) as server:
            rounds = [measure(server.url, args.bodies, args.interval) for _ in range(args.rounds)]
    for result in rounds:
        print(f"{result['bodies']} bodies of {result['body_bytes'] / 1e6:.1f} MB: /live max "
              f"{result['live_ms_max']:.0f} ms, p99 {result['live_ms_p99']:.0f} ms, median "
              f"{result['live_ms_p50']:.1f} ms over {result['probes']} probes; bodies answered after "
              + ", ".join(f"{s:.2f}" for s in result["bodies_answered_s"]) + " s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cpu": cpu_signature(), "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
