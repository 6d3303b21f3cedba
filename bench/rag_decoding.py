"""The gateway's answers with and without prompt lookup decoding: TTFT, answer tokens/s and errors, side by side.

The whole stack runs natively twice, on the same model, once with the backend's default decoding and once with
plugin_config {"prompt_lookup": true}. Each run ingests the same invented facts and asks a question on each
through `/v1/chatqna` (streamed, greedy), one at a time, then 4 and 8 at once, each question `--rounds` times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.rag_corpus import FACTS, document  # noqa: E402
from bench.servers import service  # noqa: E402
from ovgenai_common.cpu import cpu_flags  # noqa: E402
from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM  # noqa: E402


async def ask(client: httpx.AsyncClient, url: str, question: str) -> dict:
    start = time.perf_counter()
    first, answer, error = None, [], None
    body = {"messages": question, "stream": True, "temperature": 0, "max_tokens": 128}
    async with client.stream("POST", url + "/v1/chatqna", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                error = chunk["error"]
                continue
            for choice in chunk.get("choices", []):
                text = (choice.get("delta") or {}).get("content")
                if text:
                    first = first or time.perf_counter()
                    answer.append(text)
    end = time.perf_counter()
    return {"ttft": (first or end) - start, "duration": end - start, "text": "".join(answer),
            "error": error or (None if response.status_code == 200 else response.status_code)}


async def ask_all(url: str, concurrency: int, rounds: int) -> list[dict]:
    limit = asyncio.Semaphore(concurrency)

    async def one(question: str) -> dict:
        async with limit:
            return await ask(client, url, question)

    async with httpx.AsyncClient(timeout=300) as client:
        await ask(client, url, FACTS[0][1])  # warm-up
        return await asyncio.gather(*(one(question) for _, question, _ in FACTS * rounds))


def summarize(results: list[dict], count_tokens) -> dict:
    ok = [r for r in results if not r["error"]]
    rates = [count_tokens(r["text"]) / max(r["duration"] - r["ttft"], 1e-3) for r in ok if r["text"]]
    return {
        "answers": len(results),
        "errors": len(results) - len(ok),
        "correct": sum(expected.lower() in r["text"].lower()
                       for r, (_, _, expected) in zip(results, FACTS * (len(results) // len(FACTS)), strict=True)
                       if not r["error"]),
        "ttft_median_ms": round(statistics.median(r["ttft"] for r in ok) * 1000, 1) if ok else None,
        "answer_tokens_per_s_median": round(statistics.median(rates), 1) if rates else None,
        "answer_latency_median_ms": round(statistics.median(r["duration"] for r in ok) * 1000, 1) if ok else None,
    }


def run_stack(models: Path, backend_args: list[str], count_tokens, rounds: int) -> dict:
    with ExitStack() as stack, tempfile.TemporaryDirectory() as data:
        backend = stack.enter_context(service("ovgenai_server", ["--model", str(models), *backend_args]))
        embedding = stack.enter_context(service(
            "ovgenai_services.embedding", env={"EMBEDDING_MODEL_PATH": str(models / DEFAULT_EMBEDDING)}))
        llm = stack.enter_context(service("ovgenai_services.llm", env={"LLM_ENDPOINT": backend.url,
                                                                   "LLM_MODEL": DEFAULT_LLM},
                                          health_path="/v1/health_check"))
        gateway = stack.enter_context(service("ovgenai_services.gateway", env={
            "EMBEDDING_SERVER_ENDPOINT": embedding.url, "LLM_SERVER_ENDPOINT": llm.url, "DATA_DIR": data}))
        httpx.post(gateway.url + "/v1/dataprep/ingest", data={"text": document(), "name": "facts.txt"},
                   timeout=120).raise_for_status()
        out = {}
        for concurrency in (1, 4, 8):
            answers = asyncio.run(ask_all(gateway.url, concurrency, rounds))
            out[f"concurrency_{concurrency}"] = summarize(answers, count_tokens)
        out["backend_restarts"] = _restarts(backend.url)
        return out


def _restarts(url: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("ovgenai:engine_restarts_total"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=ROOT / "models", help="the model repository")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--rounds", type=int, default=3, help="how many times each question is asked per level")
    args = parser.parse_args()
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(args.model / DEFAULT_LLM))

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).input_ids.data[0])

    print("CPU:", " ".join(cpu_flags()))
    results = {
        "default decoding": run_stack(args.model, [], count_tokens, args.rounds),
        "prompt lookup": run_stack(args.model, ["--plugin_config", '{"prompt_lookup": true}'], count_tokens,
                                   args.rounds),
    }
    for mode, runs in results.items():
        print(f"{mode}: {json.dumps(runs)}")
    for concurrency in ("concurrency_1", "concurrency_4", "concurrency_8"):
        base, lookup = results["default decoding"][concurrency], results["prompt lookup"][concurrency]
        if base["answer_tokens_per_s_median"] and lookup["answer_tokens_per_s_median"]:
            ratio = lookup["answer_tokens_per_s_median"] / base["answer_tokens_per_s_median"]
            print(f"{concurrency}: answer tokens/s with prompt lookup {ratio:.2f}x, TTFT median "
                  f"{base['ttft_median_ms']} -> {lookup['ttft_median_ms']} ms, errors {base['errors']} -> "
                  f"{lookup['errors']}, correct {base['correct']} -> {lookup['correct']} of {base['answers']}")
    if args.json:
        args.json.write_text(json.dumps({"cpu_flags": cpu_flags(), **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
