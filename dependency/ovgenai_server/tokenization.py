"""vLLM's `/tokenize` and `/detokenize`: the served model's own tokenizer and chat template over HTTP, so that a
client (an evaluation harness counting context tokens, a proxy budgeting a prompt) splits text exactly as the
engine will."""

from __future__ import annotations

from typing import Any

from ovgenai_common.tokens import check_token_ids

from .engine.types import Engine
from .protocol import DetokenizeRequest, TokenizeChatRequest, TokenizeCompletionRequest
from .tool_choice import template_variables
from .validation import (
    checked_image_refs,
    engine_for,
    invalid,
    reject_unknown_fields,
    rendered,
    template_messages,
    tokenized,
)


def tokenize(engines: dict[str, Engine], request: TokenizeCompletionRequest | TokenizeChatRequest) -> dict[str, Any]:
    reject_unknown_fields(request)
    engine = engine_for(engines, request.model)
    if isinstance(request, TokenizeChatRequest):
        if request.tools and not engine.supports_tools():
            raise invalid(f"The chat template of model '{engine.name}' does not support tools.", "tools")
        checked_image_refs(engine, request.messages)  # an image's tokens are counted as its tag's
        variables, add_generation_prompt = template_variables(request.chat_template_kwargs,
                                                              request.add_generation_prompt,
                                                              request.continue_final_message)
        text = rendered(engine, template_messages(request.messages), request.tools, add_generation_prompt, variables,
                        request.continue_final_message)
    else:
        text = request.prompt
    param = "messages" if isinstance(request, TokenizeChatRequest) else "prompt"
    tokens = tokenized(engine, text, param, add_special_tokens=request.add_special_tokens)
    return {
        "count": len(tokens),
        "max_model_len": engine.max_context,
        "tokens": tokens,
        "token_strs": engine.token_strings(tokens) if request.return_token_strs else None,
    }


def detokenize(engines: dict[str, Engine], request: DetokenizeRequest) -> dict[str, Any]:
    reject_unknown_fields(request)
    engine = engine_for(engines, request.model)
    check_token_ids(request.tokens, engine.vocabulary, "tokens")
    # Special tokens are kept, as vLLM keeps them: /tokenize followed by /detokenize gives the text back.
    return {"prompt": engine.decode(request.tokens, skip_special_tokens=False)}
