"""The machine's memory bandwidth, as STREAM's copy kernel measures it, with numpy: one thread per core copying its
slice of an array much larger than the last-level cache, best of a few repeats; bytes read plus bytes written per
second (STREAM's count: the write-allocate reads a plain store also costs are not counted).

A decoding step of one stream reads every weight once, so (weight bytes per token) / (inter-token latency) against
this figure says how near a server's one-stream decoding comes to what the memory can give.
    python bench/memory_bandwidth.py [--gib 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


def last_level_cache_bytes() -> int:
    """The largest cache /sys lists for CPU 0 (a VM may show its host's whole L3), or 0."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=0)


def copy_bandwidth(gib: float | None = None, repeats: int = 5, threads: int | None = None) -> dict:
    """GB/s (10^9 bytes) of the best repeat. numpy releases the GIL for a plain copy, so threads copy in parallel."""
    threads = threads or len(os.sched_getaffinity(0))
    # At least 4x the largest cache, so that nearly every byte comes from memory.
    size = max(int((gib or 1.0) * 2**30), 4 * last_level_cache_bytes())
    count = size // 8 // threads * threads
    source, target = np.ones(count), np.zeros(count)  # written once here: every page is mapped before timing
    sources, targets = np.split(source, threads), np.split(target, threads)
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            started = time.perf_counter()
            list(pool.map(np.copyto, targets, sources))
            best = min(best, time.perf_counter() - started)
    return {"kernel": "copy", "gb_per_s": 2 * count * 8 / best / 1e9, "array_bytes": count * 8, "threads": threads,
            "repeats": repeats, "best_s": best}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="each array's size at least (GiB)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, help="default: the cores this process may use")
    args = parser.parse_args()
    result = copy_bandwidth(args.gib, args.repeats, args.threads)
    print(f"copy: {result['gb_per_s']:.1f} GB/s ({result['threads']} threads, 2 x {result['array_bytes'] / 2**30:.2f}"
          f" GiB, best of {result['repeats']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
