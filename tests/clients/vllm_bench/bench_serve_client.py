"""vLLM's benchmark client, `vllm bench serve`, as users point it at an OpenAI-compatible server: its own argument
parser and entry point (the CLI's, run in one process so that vLLM is imported once), its random dataset and its
request functions, which send vLLM's own fields (ignore_eos, top_k, min_p; truncate_prompt_tokens on embeddings).
Every request must succeed, and each answer be as long as asked, by the server's own count."""

from __future__ import annotations

import os

import pytest
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

BASE, MODEL = os.environ["CLIENT_SUITE_BASE_URL"], os.environ["CLIENT_SUITE_MODEL"]
TOKENIZER = os.environ["CLIENT_SUITE_TOKENIZER"]
EMBEDDING_BASE, EMBEDDING_MODEL = os.environ["CLIENT_SUITE_EMBEDDING_URL"], os.environ["CLIENT_SUITE_EMBEDDING_MODEL"]
EMBEDDING_TOKENIZER = os.environ["CLIENT_SUITE_EMBEDDING_TOKENIZER"]
PROMPTS, OUTPUT_LEN = 8, 8


def bench(*argv: str) -> dict:
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(["--dataset-name", "random", "--random-input-len", "32", "--num-prompts", str(PROMPTS),
                              *argv])
    return main(args)


@pytest.mark.parametrize(("backend", "endpoint"), [("openai-chat", "/v1/chat/completions"),
                                                   ("openai", "/v1/completions"),
                                                   ("openai-responses", "/v1/responses")])
def test_every_generation_api_serves_the_benchmark(backend, endpoint):
    result = bench("--backend", backend, "--base-url", BASE, "--endpoint", endpoint, "--model", MODEL,
                   "--tokenizer", TOKENIZER, "--random-output-len", str(OUTPUT_LEN), "--ignore-eos",
                   "--temperature", "0.7", "--top-k", "20", "--min-p", "0.05")
    assert (result["completed"], result["failed"]) == (PROMPTS, 0)
    assert result["total_output_tokens"] == PROMPTS * OUTPUT_LEN
    assert result["median_itl_ms"] > 0  # streamed, a token at a time


def test_the_embedding_service_serves_the_benchmark():
    result = bench("--backend", "openai-embeddings", "--base-url", EMBEDDING_BASE, "--endpoint", "/v1/embeddings",
                   "--model", EMBEDDING_MODEL, "--tokenizer", EMBEDDING_TOKENIZER, "--random-output-len", "1")
    assert result["completed"] == PROMPTS
    assert result["total_input_tokens"] > 0  # from the service's usage
