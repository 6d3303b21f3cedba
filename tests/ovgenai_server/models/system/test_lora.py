"""LoRA adapters served as models of their own on the real backend: a tiny Llama exported to f32 IR and a PEFT
adapter made for it at run time (tests/support/tiny_models.py: needs torch, transformers and optimum-intel, which
`make test` installs; the adapter is written with numpy and safetensors). The adapter changes a known prompt's
greedy answer; the base model's name, and a server without the adapter, give the original back. Which of
openvino-genai's adapter modes apply in the step loop: bench/lora_step_loop.py (bench/results.md)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from ovgenai_models.export import TextGenerationOptions, export_text_generation
from tests.support.servers import ROOT, RemoteServer
from tests.support.tiny_models import build_tiny_llama, write_tiny_lora

PROMPT = "paris is the capital of"  # words of the tiny model's own corpus
F32 = ["--inference_precision", "f32"]  # one precision for both servers: answers are compared exactly


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    checkpoint = build_tiny_llama(root / "checkpoint")
    ir = export_text_generation(str(checkpoint), "tiny", root / "repository",
                                TextGenerationOptions(weight_format="fp32"), progress=lambda _: None)
    return {"ir": ir, "adapter": write_tiny_lora(root / "adapter", checkpoint)}


@pytest.fixture(scope="module")
def adapted(tiny):
    with RemoteServer("ovgenai_server", ["serve", str(tiny["ir"]), "--served-model-name", "tiny", *F32,
                                         "--enable-lora", "--lora-modules", f"tiny-sql={tiny['adapter']}"]) as server:
        yield server


def answer(server: RemoteServer, model: str) -> str:
    reply = httpx.post(server.url + "/v1/completions", json={
        "model": model, "prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True}, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["text"]


def test_the_adapter_is_listed_as_a_model_with_its_base_as_parent(adapted, tiny):
    cards = {card["id"]: card for card in httpx.get(adapted.url + "/v1/models", timeout=10).json()["data"]}
    assert cards["tiny-sql"]["parent"] == "tiny" and "parent" not in cards["tiny"]
    assert cards["tiny-sql"]["root"] == str(tiny["adapter"] / "adapter_model.safetensors")


def test_the_adapter_changes_the_answer_and_the_base_model_gives_the_original(adapted, tiny):
    adapted_answer, base_answer = answer(adapted, "tiny-sql"), answer(adapted, "tiny")
    assert adapted_answer != base_answer
    with RemoteServer("ovgenai_server", ["serve", str(tiny["ir"]), "--served-model-name", "tiny", *F32]) as plain:
        assert answer(plain, "tiny") == base_answer  # without the adapter: the model's own answer
    assert answer(adapted, "tiny-sql") == adapted_answer  # and the adapter's, again


def test_a_missing_adapter_is_a_clear_startup_error(tiny, tmp_path):
    missing = tmp_path / "no-adapter"
    result = subprocess.run([sys.executable, "-m", "ovgenai_server", "--model", str(tiny["ir"]), "--no-autotune",
                             "--lora-modules", f"sql={missing}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "'sql'" in result.stderr and str(missing) in result.stderr
