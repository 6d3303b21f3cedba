"""Where one stream's token goes: the engine alone, in-process, at batch 1.

For each IR folder (the GGUF reader's, the export tool's), each configuration builds the serving pipeline as the
backend builds it (openvino_genai.ContinuousBatchingPipeline with the server's scheduler and properties, then the
variant's properties over them) and runs one request of `--prompt` tokens and `--tokens` new tokens through the
add_request/step loop the engine process runs, timing each decode step; openvino_genai's stateful LLMPipeline at
batch 1 is the in-engine reference (its tokens timed by a streamer). Variants are OpenVINO properties as JSON:

    python bench/one_stream.py [NAME=]MODEL_DIR... --variant default={} \
        --variant one-stream='{"NUM_STREAMS": 1}' --variant dq0='{"DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}' \
        --stateful --json bench/results/one-stream-$(date +%F).json

Each configuration runs `--rounds` times, alternating with the others (a VM's speed drifts); the median step of each
round is reported, and the median of those.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "dependency"))
sys.path.insert(0, str(ROOT))

from ovgenai_server.engine.engine_process.autotune import cpu_signature  # noqa: E402
from ovgenai_server.engine.engine_process.entry import warm_up  # noqa: E402
from ovgenai_server.models.specs import base_spec  # noqa: E402
from ovgenai_server.settings import BackendSettings  # noqa: E402


def prompt_ids(length: int, vocab: int = 49152) -> np.ndarray:
    return (np.arange(length, dtype=np.int64) * 7919 % (vocab - 100) + 100).reshape(1, -1)


def serving_pipeline(folder: Path, extra: dict[str, Any]) -> Any:
    """The backend's pipeline for `folder` (its scheduler and properties), `extra` properties over them."""
    import openvino_genai

    spec = base_spec(BackendSettings(autotune=False, cache_size=1), "m", folder)
    properties = {**spec.properties(), **extra}
    pipeline = openvino_genai.ContinuousBatchingPipeline(str(folder), spec.scheduler_config(), spec.device,
                                                         properties)
    warm_up(pipeline, spec)
    return pipeline


def step_times(pipeline: Any, prompt: int, tokens: int, request_id: int) -> list[float]:
    """Each decode step's seconds for one request alone (its prompt step left out)."""
    import openvino
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.max_new_tokens, config.ignore_eos = tokens, True
    handle = pipeline.add_request(request_id, openvino.Tensor(prompt_ids(prompt)), config)  # dropped, it is ended
    times = []
    while pipeline.has_non_finished_requests():
        started = time.perf_counter()
        pipeline.step()
        times.append(time.perf_counter() - started)
    del handle
    return times[1:]  # the first step computes the prompt


def stateful_times(folder: Path, extra: dict[str, Any], prompt: int, tokens: int) -> list[float]:
    """Each new token's seconds from openvino_genai's stateful LLMPipeline at batch 1 (SDPA, no paged cache)."""
    import openvino
    import openvino_genai

    spec = base_spec(BackendSettings(autotune=False), "m", folder)
    pipeline = openvino_genai.LLMPipeline(str(folder), spec.device, **{**spec.properties(), **extra})
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens, config.ignore_eos = tokens, True
    stamps: list[float] = []

    def streamer(_: Any) -> openvino_genai.StreamingStatus:
        stamps.append(time.perf_counter())
        return openvino_genai.StreamingStatus.RUNNING

    ids = openvino_genai.TokenizedInputs(openvino.Tensor(prompt_ids(prompt)),
                                         openvino.Tensor(np.ones((1, prompt), dtype=np.int64)))
    pipeline.generate(ids, config)  # its first run repacks the weights
    stamps.clear()
    pipeline.generate(ids, config, streamer)
    return list(np.diff(stamps))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="IR folders, each NAME=FOLDER or FOLDER")
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON properties over the server's")
    parser.add_argument("--stateful", action="store_true", help="also openvino_genai's stateful LLMPipeline")
    parser.add_argument("--prompt", type=int, default=430)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    variants = dict(item.split("=", 1) for item in args.variant) or {"default": "{}"}
    models = {(item.split("=", 1)[0] if "=" in item else Path(item).name): Path(item.split("=", 1)[-1])
              for item in args.models}
    pipelines = {f"{model} · {name}": serving_pipeline(folder, json.loads(props))
                 for model, folder in models.items() for name, props in variants.items()}
    rounds: dict[str, list[float]] = {name: [] for name in pipelines}
    rounds.update({f"{model} · stateful LLMPipeline": [] for model in models if args.stateful})
    for index in range(args.rounds):
        for name, pipeline in pipelines.items():
            rounds[name].append(statistics.median(step_times(pipeline, args.prompt, args.tokens, index)) * 1000)
        for model, folder in models.items() if args.stateful else ():
            rounds[f"{model} · stateful LLMPipeline"].append(
                statistics.median(stateful_times(folder, {}, args.prompt, args.tokens)) * 1000)
    print(f"{cpu_signature()['model']}, {cpu_signature()['cores']} cores; prompt {args.prompt}, "
          f"{args.tokens} new tokens")
    print("| model · configuration | ms a token (median of rounds) | rounds |")
    print("|---|---|---|")
    for name, values in rounds.items():
        print(f"| {name} | {statistics.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cpu": cpu_signature(), "models": {k: str(v) for k, v in models.items()},
                                         "prompt": args.prompt, "tokens": args.tokens, "variants": variants,
                                         "ms_per_token": rounds}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
