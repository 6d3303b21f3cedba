"""vLLM's /tokenize and /detokenize on the real backend: the engine's own tokenizer and chat template, and 400s in
OpenAI's error shape for what cannot be honoured."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.ovgenai_server.system.test_bad_input import assert_error

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def post(backend, path, body):
    return httpx.post(backend.url + path, json=body, timeout=60)


def test_tokenize_counts_what_the_completion_is_charged_for(backend, default_model):
    text = "The capital of France is Paris."
    body = post(backend, "/tokenize", {"model": default_model, "prompt": text}).json()
    assert set(body) == {"count", "max_model_len", "tokens", "token_strs"}
    assert body["count"] == len(body["tokens"]) > 0 and body["max_model_len"] == 4096 and body["token_strs"] is None
    client = openai.OpenAI(base_url=backend.url + "/v1", api_key="none")
    completion = client.completions.create(model=default_model, prompt=text, max_tokens=1)
    assert completion.usage.prompt_tokens == body["count"]
    # ...and the same ids, sent as the prompt, are the same prompt.
    again = client.completions.create(model=default_model, prompt=body["tokens"], max_tokens=1)
    assert again.usage.prompt_tokens == body["count"]


def test_tokenize_chat_applies_the_template_as_chat_completions_do(backend, default_model):
    body = post(backend, "/tokenize", {"model": default_model, "messages": MESSAGES}).json()
    client = openai.OpenAI(base_url=backend.url + "/v1", api_key="none")
    chat = client.chat.completions.create(model=default_model, messages=MESSAGES, max_tokens=1)
    assert chat.usage.prompt_tokens == body["count"]
    without = post(backend, "/tokenize", {"model": default_model, "messages": MESSAGES, "add_generation_prompt": False})
    assert without.json()["count"] < body["count"]  # the assistant's opening is left out


PREFILLED = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "The answer is"}]


def prompt_text(backend, default_model, **fields) -> str:
    ids = post(backend, "/tokenize", {"model": default_model, "messages": PREFILLED, **fields}).json()["tokens"]
    return post(backend, "/detokenize", {"model": default_model, "tokens": ids}).json()["prompt"]


def test_a_last_assistant_message_without_a_generation_prompt_is_continued(backend, default_model):
    """It was rendered closed (`The answer is<|im_end|>`), and the model began a new turn."""
    continued = prompt_text(backend, default_model, add_generation_prompt=False)
    assert continued.endswith("<|im_start|>assistant\nThe answer is")
    assert prompt_text(backend, default_model, continue_final_message=True) == continued  # vLLM's name for it
    client = openai.OpenAI(base_url=backend.url + "/v1", api_key="none")
    for extra in ({"chat_template_kwargs": {"add_generation_prompt": False}}, {"continue_final_message": True}):
        reply = client.chat.completions.create(model=default_model, messages=PREFILLED, max_tokens=4, temperature=0,
                                               extra_body=extra)
        assert reply.usage.prompt_tokens == len(post(backend, "/tokenize", {
            "model": default_model, "messages": PREFILLED, "add_generation_prompt": False}).json()["tokens"])
    refused = post(backend, "/v1/chat/completions", {"model": default_model, "messages": PREFILLED[:1],
                                                     "continue_final_message": True})
    assert_error(refused, 400, param="continue_final_message")


def test_detokenize_gives_the_text_back_and_token_strs_spell_each_id(backend, default_model):
    text = "<|im_start|>user\nHello, world!"
    tokenized = post(backend, "/tokenize", {"model": default_model, "prompt": text, "return_token_strs": True}).json()
    assert len(tokenized["token_strs"]) == tokenized["count"]
    assert tokenized["token_strs"][0] == "<|im_start|>"  # a special token is one id
    assert "".join(tokenized["token_strs"]) == text
    back = post(backend, "/detokenize", {"model": default_model, "tokens": tokenized["tokens"]})
    assert back.status_code == 200 and back.json() == {"prompt": text}


def test_tokenizer_routes_refuse_bad_input(backend, default_model):
    assert_error(post(backend, "/detokenize", {"model": default_model, "tokens": [10**9]}), 400, "vocabulary",
                 param="tokens")
    assert_error(post(backend, "/detokenize", {"model": default_model, "tokens": [-1]}), 400, param="tokens.0")
    assert_error(post(backend, "/detokenize", {"model": default_model, "tokens": "abc"}), 400)
    assert_error(post(backend, "/tokenize", {"model": default_model}), 400)
    assert_error(post(backend, "/tokenize", {"model": "no-such-model", "prompt": "a"}), 404, param="model")
    response = post(backend, "/tokenize", {"model": default_model, "prompt": "a", "chat_template": "{{ 1 }}"})
    assert_error(response, 400, "chat_template", param="chat_template")


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "bad", "content": "x"}]}, "messages.0.role"),
    ({"messages": []}, "messages"),
    ({}, "prompt"),
    ({"prompt": 5}, "prompt"),
])
def test_tokenize_errors_name_the_field_of_the_form_sent(backend, default_model, body, param):
    """A chat body was checked as the text form ("Missing required parameter 'TokenizeCompletionRequest.prompt'")."""
    assert_error(post(backend, "/tokenize", {"model": default_model, **body}), 400, param=param)


def test_tokenizer_info_gives_the_special_tokens_and_the_template_chat_renders_with(backend, default_model):
    """vLLM's /tokenizer_info, as lm-evaluation-harness's remote tokenizer reads it."""
    info = httpx.get(backend.url + "/tokenizer_info", timeout=30).json()
    assert info == httpx.get(backend.url + "/tokenizer_info", params={"model": default_model}, timeout=30).json()
    assert info["model_max_length"] == 4096 and info["tokenizer_class"] == "openvino_genai.Tokenizer"
    # SmolLM2's: each a single token of the vocabulary, the end token the one that closes an assistant's turn.
    for name in ("bos_token", "eos_token", "pad_token"):
        tokens = post(backend, "/tokenize", {"prompt": info[name], "add_special_tokens": False}).json()["tokens"]
        assert len(tokens) == 1, name
    # The template is the one chat requests are rendered with (lm-eval renders it itself with Jinja).
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    ids = post(backend, "/tokenize", {"model": default_model, "messages": MESSAGES}).json()["tokens"]
    served = post(backend, "/detokenize", {"model": default_model, "tokens": ids}).json()["prompt"]
    template = ImmutableSandboxedEnvironment().from_string(info["chat_template"])
    assert template.render(messages=MESSAGES, add_generation_prompt=True) == served
    assert served.count(info["eos_token"]) == 2  # the system's and the user's turn each end with it
    assert httpx.get(backend.url + "/tokenizer_info", params={"model": "nope"}, timeout=30).status_code == 404
