"""lm-evaluation-harness as its users run it against the backend, from its own venv (tests/support/client_suites.py):
a multiple-choice task over `local-completions` (each choice scored with echo and `logprobs: 1`) and a generative
task over `local-chat-completions`, both with lm-eval's remote tokenizer (vLLM's /tokenizer_info, /tokenize and
/detokenize: no Hugging Face tokenizer folder), on a few samples of the local tasks in tests/clients/lm_eval."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.client_suites import SUITES, client_env, program, run
from tests.support.servers import MODELS, RemoteServer

TASKS = SUITES / "lm_eval"
SAMPLES = 4


@pytest.fixture(scope="module")
def eval_backend(default_model):  # noqa: ARG001 - needs the default model prepared
    # Scoring a prompt needs every prompt token computed: no prefix caching (docs/backend.md, Evaluation).
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--enable_prefix_caching", "false"]) as server:
        yield server


def lm_eval(server, model: str, kind: str, path: str, task: str, out: Path, *extra: str) -> tuple[dict, list[dict]]:
    """lm_eval on `task` through `kind` at the backend's `path`; its results and its logged samples."""
    model_args = f"model={model},base_url={server.url}{path},tokenizer_backend=remote"
    run([program("lm-eval", "lm_eval"), "--model", kind, "--model_args", model_args, "--tasks", task,
         "--include_path", ".", "--limit", str(SAMPLES), "--output_path", out, "--log_samples", *extra],
        TASKS, client_env(HF_HOME=str(out / "hf")), timeout=600)
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    samples = [json.loads(line) for line in next(out.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
    return results, samples


def served_loglikelihood(server, model: str, context: str, continuation: str) -> float:
    """The continuation's log probability after the context, asked of the backend directly, with the tokens split
    as lm-eval splits them (the whole text tokenized, the context's tokens first)."""
    def tokens(text: str) -> list[int]:
        body = {"prompt": text, "add_special_tokens": False}
        return httpx.post(server.url + "/tokenize", json=body, timeout=30).json()["tokens"]

    whole, head = tokens(context + continuation), tokens(context)
    body = {"model": model, "prompt": whole, "echo": True, "logprobs": 0, "max_tokens": 0}
    scores = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["logprobs"]
    return sum(scores["token_logprobs"][len(head):])


def test_a_multiple_choice_task_scores_each_choice_as_the_backend_does(eval_backend, default_model, tmp_path):
    """lm-eval's loglikelihood requests ask for `logprobs: 1` (a 400 before the one alternative was accepted)."""
    results, samples = lm_eval(eval_backend, default_model, "local-completions", "/v1/completions",
                               "capitals_choice", tmp_path)
    assert results["n-samples"]["capitals_choice"]["effective"] == SAMPLES
    assert 0 <= results["results"]["capitals_choice"]["acc,none"] <= 1
    first = samples[0]
    scored = [float(value) for ((value, _greedy),) in first["resps"]]
    expected = [served_loglikelihood(eval_backend, default_model, arg["arg_0"], arg["arg_1"])
                for arg in first["arguments"].values()]
    assert scored == pytest.approx(expected, abs=1e-3)


def test_a_generative_task_answers_through_chat(eval_backend, default_model, tmp_path):
    results, samples = lm_eval(eval_backend, default_model, "local-chat-completions", "/v1/chat/completions",
                               "capitals_answer", tmp_path, "--apply_chat_template")
    assert results["n-samples"]["capitals_answer"]["effective"] == SAMPLES
    assert 0 <= results["results"]["capitals_answer"]["exact_match,city"] <= 1
    # Each answer is the backend's greedy answer, cut at the task's stop (a new line) or the model's end of turn,
    # which lm-eval read from /tokenizer_info.
    (conversation,) = samples[0]["arguments"]["gen_args_0"]["arg_0"]  # the chat, as lm-eval's JSON text
    question = json.loads(conversation)
    direct = httpx.post(eval_backend.url + "/v1/chat/completions", timeout=60, json={
        "model": default_model, "messages": question, "max_tokens": 16, "temperature": 0,
        "stop": ["\n", "<|im_end|>"]}).json()["choices"][0]["message"]["content"]
    assert samples[0]["resps"] == [[direct]] and direct


def test_the_scores_are_the_same_on_a_second_start(eval_backend, default_model, tmp_path):
    """The README's recipe let autotune choose the KV cache's precision by timing, so two starts under different
    load scored the same request -4.38 and -4.63; the recipe now pins what autotune would choose (--no-autotune, as
    these servers run), and a fresh start scores every choice exactly as the first did."""
    _, first = lm_eval(eval_backend, default_model, "local-completions", "/v1/completions", "capitals_choice",
                       tmp_path / "first")
    args = ["--model", str(MODELS), "--enable_prefix_caching", "false", "--no-autotune"]
    with RemoteServer("ovgenai_server", args) as again:
        _, second = lm_eval(again, default_model, "local-completions", "/v1/completions", "capitals_choice",
                            tmp_path / "second")
    assert [sample["resps"] for sample in first] == [sample["resps"] for sample in second]
