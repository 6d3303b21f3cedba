"""The backend's own request models, beside the shared OpenAI ones (`ovgenai_common/protocol.py`): vLLM's
tokenizer routes, in vLLM's field names, so clients written for vLLM (lm-evaluation-harness's remote tokenizer
among them) work unchanged."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag

from ovgenai_common.protocol import ChatMessage, OpenAIModel


class TokenizeCompletionRequest(OpenAIModel):
    model: str | None = None
    prompt: str
    add_special_tokens: bool = True
    return_token_strs: bool = False


class TokenizeChatRequest(OpenAIModel):
    model: str | None = None
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    add_generation_prompt: bool | None = None  # true, unless continue_final_message
    continue_final_message: bool = False  # vLLM's: the last (assistant) message is continued, not closed
    # The chat template adds the special tokens it wants; more only when asked (vLLM's default too).
    add_special_tokens: bool = False
    return_token_strs: bool = False
    tools: list[dict[str, Any]] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class DetokenizeRequest(OpenAIModel):
    model: str | None = None
    # Any int64 is accepted here; ids outside the model's vocabulary are refused with a 400 that names them.
    tokens: list[Annotated[int, Field(ge=0, le=2**63 - 1)]]


def _tokenize_kind(body: Any) -> str:
    return "TokenizeChatRequest" if isinstance(body, dict) and "messages" in body else "TokenizeCompletionRequest"


# One of the two, chosen by whether `messages` is there: a chat body's errors are its own, not the text form's
# ("Missing required parameter 'prompt'" for a message with a bad role). The tags are the classes' names, which the
# error handler leaves out of the field it names.
TokenizeRequest = Annotated[
    Annotated[TokenizeCompletionRequest, Tag("TokenizeCompletionRequest")]
    | Annotated[TokenizeChatRequest, Tag("TokenizeChatRequest")],
    Discriminator(_tokenize_kind),
]
