"""Perplexity of a served model on a fixed text, to weigh what a weight format or an engine option costs in accuracy.

Starts the backend on each model folder given (with prefix caching off, which prompt scoring needs, and optional
OpenVINO properties), scores the text's tokens through `/v1/completions` with `echo` and `logprobs` (as lm-eval
does), and prints the mean negative log-likelihood per token and its exponent. The text is the Python standard
library's docstrings that the int8 calibration set is made of (`ovgenai_models.calibration`), joined into prompts
of ~2,500 characters: fixed for a given Python, and not the text of any model's training set in particular.

    bench/perplexity.py models/HuggingFaceTB/SmolLM2-135M-Instruct other/model \\
        --plugin-config '{"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}'
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.servers import service  # noqa: E402
from ovgenai_models.calibration import builtin_texts  # noqa: E402

PROMPT_CHARACTERS = 2500


def prompts(limit: int) -> list[str]:
    """The calibration passages (the texts over 200 characters), joined into prompts of ~2,500 characters."""
    text = "\n\n".join(t for t in builtin_texts() if len(t) > 200)[:limit]
    return [text[i : i + PROMPT_CHARACTERS] for i in range(0, len(text), PROMPT_CHARACTERS)]


def negative_log_likelihoods(base_url: str, texts: list[str]) -> list[float]:
    """Every scored token's -log p (the first token of each prompt has none)."""
    model = httpx.get(base_url + "/v1/models").json()["data"][0]["id"]
    scores: list[float] = []
    with httpx.Client(timeout=300) as client:
        for text in texts:
            response = client.post(base_url + "/v1/completions", json={
                "model": model, "prompt": text, "echo": True, "logprobs": 0, "max_tokens": 0})
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
            logprobs = response.json()["choices"][0]["logprobs"]["token_logprobs"]
            scores += [-value for value in logprobs if value is not None]
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", type=Path, help="model folders (OpenVINO IR)")
    parser.add_argument("--plugin-config", action="append", default=[],
                        help="OpenVINO properties as JSON; repeat to score each model under each")
    parser.add_argument("--characters", type=int, default=30_000, help="how much of the text to score")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    texts = prompts(args.characters)
    results = []
    for folder in args.models:
        for config in args.plugin_config or [None]:
            backend = ["--model_path", str(folder), "--enable_prefix_caching", "false", "--no-autotune",
                       "--log_level", "warning", *(["--plugin_config", config] if config else [])]
            with service("ovgenai_server", backend) as server:
                scores = negative_log_likelihoods(server.url, texts)
            mean = statistics.mean(scores)
            results.append({"model": str(folder), "plugin_config": json.loads(config) if config else None,
                            "tokens": len(scores), "mean_nll": mean, "perplexity": math.exp(mean)})
            print(f"{str(folder):<60} {config or '':<42} tokens {len(scores):>6}  NLL {mean:.5f}  "
                  f"perplexity {math.exp(mean):.3f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
