"""`GET <url>` every 50 ms until standard input closes, then print the latencies (ms) as a JSON list.

A process of its own, so that the figure is the server's: a probe thread inside the load generator waits for the
GIL behind the event loop that parses every stream (up to the 5 ms switch interval per wait), which is the client's
latency, not the server's.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx


def main() -> int:
    url = sys.argv[1]
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    latencies: list[float] = []
    with httpx.Client(timeout=10) as client:
        while not stopped.wait(0.05):
            start = time.perf_counter()
            response = client.get(url)
            latencies.append((time.perf_counter() - start) * 1000)
            if response.status_code != 200:
                print(f"{url} answered {response.status_code}: {response.text[:200]}", file=sys.stderr)
                return 1
    sys.stdout.write(json.dumps(latencies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
