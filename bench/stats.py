"""Per-request timings → the summary vLLM's benchmark_serving prints."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class RequestTiming:
    start: float
    token_times: list[float] = field(default_factory=list)
    tokens: int = 0

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.start

    @property
    def tpot(self) -> float:
        if self.tokens <= 1:
            return 0.0
        return (self.token_times[-1] - self.token_times[0]) / (self.tokens - 1)

    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False)]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(name: str, timings: list[RequestTiming], duration: float) -> dict:
    ttfts = [t.ttft * 1000 for t in timings]
    tpots = [t.tpot * 1000 for t in timings]
    itls = [x * 1000 for t in timings for x in t.itls()]
    output = sum(t.tokens for t in timings)
    return {
        "name": name,
        "requests": len(timings),
        "duration_s": duration,
        "request_throughput": len(timings) / duration,
        "output_tokens_per_s": output / duration,
        "output_tokens": output,
        "ttft_ms": (statistics.mean(ttfts), statistics.median(ttfts), percentile(ttfts, 99)),
        "tpot_ms": (statistics.mean(tpots), statistics.median(tpots), percentile(tpots, 99)),
        "itl_ms": (statistics.mean(itls) if itls else 0, statistics.median(itls) if itls else 0,
                   percentile(itls, 99)),
    }


def print_summary(result: dict) -> None:
    print(f"============ {result['name']} ============")
    print(f"{'Successful requests:':<40}{result['requests']:>12}")
    print(f"{'Benchmark duration (s):':<40}{result['duration_s']:>12.2f}")
    print(f"{'Total generated tokens:':<40}{result['output_tokens']:>12}")
    print(f"{'Request throughput (req/s):':<40}{result['request_throughput']:>12.2f}")
    print(f"{'Output token throughput (tok/s):':<40}{result['output_tokens_per_s']:>12.2f}")
    for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL")):
        mean, median, p99 = result[key]
        print(f"{'Mean ' + label + ' (ms):':<40}{mean:>12.2f}")
        print(f"{'Median ' + label + ' (ms):':<40}{median:>12.2f}")
        print(f"{'P99 ' + label + ' (ms):':<40}{p99:>12.2f}")
