"""vLLM's `/tokenize`, `/detokenize` and `/tokenizer_info`: the served model's own tokenizer and chat template over
HTTP, so that a client (an evaluation harness counting context tokens, a proxy budgeting a prompt) splits text exactly
as the engine will, and knows its special tokens without a copy of the tokenizer's files."""

from __future__ import annotations

from typing import Any

from ovgenai_common.tokens import check_token_ids

from ..models.registry import ModelRegistry
from ..request.prompts import checked_image_refs, rendered, template_messages, tokenized
from ..tools.choice import template_variables, tool_names
from ..tools.described import describe, described
from .protocol import DetokenizeRequest, TokenizeChatRequest, TokenizeCompletionRequest


def tokenize(models: ModelRegistry, request: TokenizeCompletionRequest | TokenizeChatRequest) -> dict[str, Any]:
    request.refuse_unknown_fields()
    model = models.named(request.model)
    if isinstance(request, TokenizeChatRequest):
        checked_image_refs(model.facts, request.messages)  # an image's tokens are counted as its tag's
        variables, add_generation_prompt = template_variables(request.chat_template_kwargs,
                                                              request.add_generation_prompt,
                                                              request.continue_final_message)
        messages, tools = template_messages(request.messages), request.tools or None
        if tools and not model.facts.supports_tools:  # described in the system message, as a chat request's are
            tool_names(tools)
            messages, tools = described(messages, describe(tools, parallel=True)), None
        text = rendered(model, messages, tools, add_generation_prompt, variables, request.continue_final_message)
    else:
        text = request.prompt
    param = "messages" if isinstance(request, TokenizeChatRequest) else "prompt"
    tokens = tokenized(model, text, param, add_special_tokens=request.add_special_tokens)
    return {
        "count": len(tokens),
        "max_model_len": model.facts.max_context,
        "tokens": tokens,
        "token_strs": model.prompts.token_strings(tokens) if request.return_token_strs else None,
    }


def detokenize(models: ModelRegistry, request: DetokenizeRequest) -> dict[str, Any]:
    request.refuse_unknown_fields()
    model = models.named(request.model)
    check_token_ids(request.tokens, model.facts.vocabulary, "tokens")
    # Special tokens are kept, as vLLM keeps them: /tokenize followed by /detokenize gives the text back.
    return {"prompt": model.prompts.decode(request.tokens, skip_special_tokens=False)}


def tokenizer_info(models: ModelRegistry, name: str | None) -> dict[str, Any]:
    """The model's special tokens, chat template and context length in the names of Hugging Face's
    tokenizer_config.json, as vLLM's /tokenizer_info answers (what lm-evaluation-harness's remote tokenizer reads)."""
    model = models.named(name)
    return {**model.prompts.tokenizer_config(), "model_max_length": model.facts.max_context}
