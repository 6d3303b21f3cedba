"""Prompt building: a chat's conversation through the model's template (its images tagged in place), or a
completion's prompts, to the typed prompt the engine takes (token ids, or text with images for a vision-language
model); a 400 where the template refuses the conversation, or a text reaches the most the tokenizer counts."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, cast

from ovgenai_common.errors import invalid, library_reason
from ovgenai_common.protocol import TextPart
from ovgenai_common.responses_protocol import effort_variables
from ovgenai_common.tokens import check_token_ids

from ..api.protocol import ChatCompletionRequest, ChatMessage
from ..engine.contract.types import Image, Prompt, TextPrompt, TokenPrompt
from ..models.registry import ModelFacts, ServedModel
from ..tools.choice import template_variables
from ..tools.described import described
from .images import ImageRef, decoded, image_refs, image_tag

COUNTED_PIECE = 32_768  # characters tokenized at a time while a long text is counted (_refuse_past)


def chat_prompt(model: ServedModel, request: ChatCompletionRequest, tools: list[dict[str, Any]] | None,
                description: str | None = None) -> tuple[str, Prompt]:
    """The conversation rendered (with `tools` when the template renders them, or their `description` in the system
    message when it cannot: tools/described.py) and the prompt the engine takes."""
    images = decoded(checked_image_refs(model.facts, request.messages))
    # reasoning_effort is the switch chat_template_kwargs may also set; what the kwargs set wins
    kwargs = {**effort_variables(request.reasoning_effort), **(request.chat_template_kwargs or {})}
    variables, add_generation_prompt = template_variables(kwargs, request.add_generation_prompt,
                                                          request.continue_final_message)
    messages = template_messages(request.messages)
    if description is not None:
        messages = described(messages, description)
    text = rendered(model, messages, tools, add_generation_prompt, variables, request.continue_final_message)
    ids = tokenized(model, text, "messages", add_special_tokens=False, context=model.facts.max_context)
    return text, typed(model.facts, text, ids, images)


def typed(facts: ModelFacts, text: str, ids: list[int], images: list[Image] | None = None) -> Prompt:
    """A vision-language model takes the prompt's text, in which the image tags place the images; any other model
    its token ids."""
    return TextPrompt(text, ids, tuple(images or ())) if facts.vision else TokenPrompt(ids)


def completion_prompts(model: ServedModel,
                       prompt: str | list[str] | list[int] | list[list[int]]) -> list[tuple[Prompt, str | None]]:
    """Each prompt of a completion request, with its text when it came as text."""
    prompts = _prompt_list(prompt)
    if not prompts:
        raise invalid("'prompt' must not be empty.", "prompt")
    out: list[tuple[Prompt, str | None]] = []
    for one in prompts:
        if isinstance(one, str):
            ids = tokenized(model, one, "prompt", context=model.facts.max_context)
            out.append((typed(model.facts, one, ids), one))
        else:
            check_token_ids(one, model.facts.vocabulary, "prompt")
            out.append((TokenPrompt(list(one)), None))
        if not out[-1][0].token_ids:
            raise invalid("'prompt' must not be empty.", "prompt")
    return out


def rendered(model: ServedModel, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool,
             variables: dict[str, Any] | None, continue_final_message: bool = False) -> str:
    """The conversation through the model's chat template; a 400 with the template's own reason where it refuses
    (its `raise_exception`, or the library's, without the library's source paths).

    A last assistant message without a generation prompt (or with vLLM's `continue_final_message`) is continued:
    the text is cut right after that message's content, so the template's end of turn after it goes (as
    transformers' and vLLM's continue_final_message cut it); it was rendered closed, and the model began a new
    turn."""
    if continue_final_message and add_generation_prompt:
        raise invalid("'continue_final_message' continues the last message: it cannot be combined with "
                      "'add_generation_prompt' true.", "continue_final_message")
    continuing = not add_generation_prompt and messages[-1]["role"] == "assistant"
    if continue_final_message and not continuing:
        raise invalid("'continue_final_message' needs the last message to be the assistant's.",
                      "continue_final_message")
    try:
        text = model.prompts.render(messages, tools, add_generation_prompt, variables)
    except Exception as error:  # the template itself refused the conversation
        raise invalid(f"The chat template rejected the messages: {library_reason(error)}", "messages") from error
    content = messages[-1].get("content")
    if not continuing or not isinstance(content, str) or not content.strip():
        return text
    for shown in (content, content.strip()):  # templates that trim the content show it stripped
        if (at := text.rfind(shown)) >= 0:
            return text[: at + len(shown)]
    raise invalid("The chat template does not show the last assistant message as it was sent, so it cannot be "
                  "continued.", "messages")


def tokenized(model: ServedModel, text: str, param: str, add_special_tokens: bool = True,
              context: int | None = None) -> list[int]:
    """`text`'s token ids, whole: a text that reaches a limit the tokenizer cuts at is refused, never served cut.
    With `context`, a text certainly longer is refused before it is tokenized whole (`_refuse_past`)."""
    if context is not None:
        _refuse_past(model, text, param, context)
    ids = model.prompts.tokenize(text, add_special_tokens=add_special_tokens)
    limit = model.facts.tokenizer_limit
    if limit is not None and len(ids) >= limit:
        raise invalid(
            f"The text has at least {limit} tokens, the most this model's tokenizer counts (it drops the beginning "
            "of longer texts); shorten it, or prepare the model again with `python -m ovgenai_models` to lift the "
            "limit.", param,
        )
    return ids


def _refuse_past(model: ServedModel, text: str, param: str, context: int) -> None:
    """A 400 for a text that has at least `context` tokens, known without tokenizing it whole: the tokenizer holds the
    GIL for as long as a call lasts (4 MiB: ~85 ms), stalling the event loop (streams, probes). A text longer than
    `context` of the vocabulary's longest tokens needs no tokenizer at all; a shorter one is counted piece by piece,
    about a millisecond each, so the loop runs between them (a piece's boundary moves the count by a token or two:
    refused only past that)."""
    longest = model.facts.longest_token
    if longest and len(text) >= context * longest:  # each token stands for at most `longest` characters
        raise invalid(f"The prompt has at least {len(text) // longest} tokens, but this model's context is limited "
                      f"to {context} tokens.", param)
    if len(text) <= COUNTED_PIECE:
        return
    counted = 0
    for boundaries, start in enumerate(range(0, len(text), COUNTED_PIECE)):
        counted += len(model.prompts.tokenize(text[start:start + COUNTED_PIECE], add_special_tokens=False))
        at_least = counted - 2 * boundaries
        if at_least >= context:
            raise invalid(f"The prompt has at least {at_least} tokens, but this model's context is limited to "
                          f"{context} tokens.", param)


def checked_image_refs(facts: ModelFacts, messages: list[ChatMessage]) -> list[ImageRef]:
    """The messages' images, refused (400) for a model that reads no images."""
    refs = image_refs(messages)
    if refs and not facts.vision:
        raise invalid(f"Model '{facts.name}' takes text only; images need a vision-language model.", refs[0].param)
    return refs


def template_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as the chat template takes them: an image part becomes openvino-genai's tag for it, in place."""
    images = itertools.count()
    return [_template_message(m, images) for m in messages]


def _template_message(message: ChatMessage, images: Iterator[int]) -> dict[str, Any]:
    content = message.content
    text = "".join(part.text if isinstance(part, TextPart) else image_tag(next(images)) for part in content) if (
        isinstance(content, list)) else message.text()
    out: dict[str, Any] = {"role": message.role, "content": text}
    if message.role == "developer":
        out["role"] = "system"
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        # Arguments stay the JSON text OpenAI's clients send: a template that writes them as an object
        # (`arguments | tojson`) gets one from the template engine (Minja parses them for such templates).
        out["tool_calls"] = [call.model_dump(exclude_none=True) for call in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def _prompt_list(prompt: str | list[str] | list[int] | list[list[int]]) -> list[str | list[int]]:
    """A completion's prompt as a list of prompts: a string, or one list of token ids, is one prompt."""
    if isinstance(prompt, str):
        return [prompt]
    if prompt and isinstance(prompt[0], int):
        return [cast(list[int], prompt)]
    return cast(list[str | list[int]], list(prompt))
