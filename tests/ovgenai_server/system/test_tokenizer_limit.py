"""A tokenizer that cuts long texts never makes a prompt lose its beginning. openvino-genai's GGUF reader builds
tokenizers that keep the last 8,192 tokens of any text; model preparation lifts that limit
(tests/ovgenai_models/system/test_export.py), and a model prepared before it did is still served whole or not at
all: the backend measures the limit at start and refuses a text that reaches it (400), where it used to count 8,192
tokens and serve the text without its beginning."""

from __future__ import annotations

import shutil

import httpx
import pytest

from ovgenai_common.tokens import truncation_limit
from tests.ovgenai_server.system.test_bad_input import assert_error
from tests.support.servers import RemoteServer

LONG = "START " + "hello world " * 10_000 + "END"  # ~20,000 tokens


@pytest.fixture(scope="module")
def cutting_model(tmp_path_factory):
    """The default model as openvino-genai converts its GGUF, with the tokenizer's cut left in place."""
    import openvino_genai

    from ovgenai_models.defaults import LLM_FILE, LLM_PACKAGE, package_dir

    folder = tmp_path_factory.mktemp("cutting")
    copy = folder / "model.gguf"
    shutil.copyfile(package_dir(LLM_PACKAGE) / LLM_FILE, copy)
    openvino_genai.LLMPipeline(str(copy), "CPU", enable_save_ov_model=True)
    copy.unlink()
    return folder


def test_the_cut_is_measured(cutting_model):
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(cutting_model))
    assert len(tokenizer.encode(LONG).input_ids.data[0]) == 8192  # what the library builds
    assert truncation_limit(tokenizer, beyond=4096) == 8192


def test_a_text_the_tokenizer_would_cut_is_refused_not_served_cut(cutting_model):
    with RemoteServer("ovgenai_server", ["--model_path", str(cutting_model), "--served_model_name", "cut",
                                         "--max_tokens_limit", "16384"]) as backend:
        counted = httpx.post(backend.url + "/tokenize", json={"model": "cut", "prompt": LONG}, timeout=60)
        assert_error(counted, 400, "8192 tokens", param="prompt")
        completion = httpx.post(backend.url + "/v1/completions", json={"model": "cut", "prompt": LONG,
                                                                       "max_tokens": 1}, timeout=60)
        assert_error(completion, 400, param="prompt")
        chat = httpx.post(backend.url + "/v1/chat/completions", timeout=60, json={
            "model": "cut", "max_tokens": 1, "messages": [{"role": "user", "content": LONG}]})
        assert_error(chat, 400, param="messages")
        short = httpx.post(backend.url + "/v1/completions", json={"model": "cut", "prompt": "Hello",
                                                                  "max_tokens": 1}, timeout=60)
        assert short.status_code == 200, short.text
