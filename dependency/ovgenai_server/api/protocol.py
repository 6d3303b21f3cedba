"""The backend's request models: OpenAI's chat and text completions (their messages, images, tool calls, sampling
and structured-output fields) and vLLM's tokenizer routes, in vLLM's field names, so clients written for vLLM
(lm-evaluation-harness's remote tokenizer among them) work unchanged. What the services share (the base model, text
parts, stream options) is in ovgenai_common/protocol.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator

from ovgenai_common.protocol import (
    FLOAT32_SMALLEST_NORMAL,
    MAX_CONTENT_PARTS,
    MAX_MESSAGES,
    MAX_TOOLS,
    OpenAIModel,
    StreamOptions,
    TextPart,
    counted,
)
from ovgenai_common.responses_protocol import Effort

# Every stop string is looked for in the tail of the text after each token: the work per token is bounded. OpenAI
# takes 4 strings; vLLM and Anthropic more.
MAX_STOP_STRINGS = 64
MAX_STOP_LENGTH = 512
# Past float32's range a sampling value becomes infinity in the engine.
FLOAT32_LARGEST = 3.4028234663852886e38


class ImageURL(BaseModel):
    model_config = ConfigDict(strict=True)

    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(BaseModel):
    """An image in a chat message, as OpenAI's API sends it (taken by models that read images)."""

    model_config = ConfigDict(strict=True)

    type: Literal["image_url"]
    image_url: ImageURL


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class CalledFunction(BaseModel):
    model_config = ConfigDict(strict=True)

    name: str
    arguments: str  # JSON text, as OpenAI sends and requires it


class ToolCall(BaseModel):
    """A call an assistant turn made, as a client sends the conversation back."""

    model_config = ConfigDict(strict=True)

    id: str | None = None
    type: Literal["function"] = "function"
    function: CalledFunction


ToolCalls = Annotated[
    list[ToolCall], Field(max_length=MAX_CONTENT_PARTS), BeforeValidator(counted("tool calls", MAX_CONTENT_PARTS))
]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: ToolCalls | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _as_openai_requires(self) -> ChatMessage:
        # OpenAI's own rules: a tool result names the call it answers, and an assistant turn says something.
        if self.role == "tool" and (self.content is None or not self.tool_call_id):
            raise ValueError("a 'tool' message needs 'content' and 'tool_call_id'")
        if self.role == "assistant" and self.content is None and not self.tool_calls:
            raise ValueError("an 'assistant' message needs 'content' or 'tool_calls'")
        if self.role in ("system", "developer", "user") and self.content is None:
            raise ValueError(f"a '{self.role}' message needs 'content'")
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextPart))

    def image_parts(self) -> list[ImagePart]:
        return [part for part in self.content if isinstance(part, ImagePart)] if isinstance(self.content, list) else []


class ResponseFormat(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class StructuredOutputs(BaseModel):
    """vLLM's `structured_outputs` object: one constraint on the output (a JSON schema, a regular expression, one of
    a list of strings, or an EBNF grammar). Its other options (whitespace patterns, structural tags) are refused."""

    model_config = ConfigDict(strict=True, extra="forbid")

    json_schema: dict[str, Any] | str | None = Field(None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None


class SamplingRequest(OpenAIModel):
    """Fields shared by chat and text completions."""

    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    # As vLLM takes it: any 64-bit integer, signed or not (the engine's seed is unsigned: negatives wrap around).
    seed: Annotated[int, Field(ge=-(2**63), le=2**64 - 1)] | None = None
    stop: str | list[str] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repetition_penalty: Annotated[float, Field(ge=FLOAT32_SMALLEST_NORMAL, le=FLOAT32_LARGEST)] | None = None
    n: Annotated[int, Field(ge=1)] = 1
    best_of: Annotated[int, Field(ge=1)] | None = None
    ignore_eos: bool = False
    # vLLM's: no end of sequence and no stop string before this many tokens.
    min_tokens: Annotated[int, Field(ge=0)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    # Grammar-constrained output as vLLM takes it (the OpenAI SDK sends it through extra_body): the
    # `structured_outputs` object of vLLM 0.12 and later, and the top-level `guided_*` fields it replaced.
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    # OVMS's prompt lookup decoding parameters, for a model served with plugin_config {"prompt_lookup": true}.
    num_assistant_tokens: Annotated[int, Field(ge=1, le=64)] | None = None
    max_ngram_size: Annotated[int, Field(ge=1, le=64)] | None = None


# Bounded before their items are validated (ovgenai_common/protocol.py)
ChatMessages = Annotated[
    list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES),
    BeforeValidator(counted("messages", MAX_MESSAGES, MAX_CONTENT_PARTS)),
]
Tools = Annotated[list[dict[str, Any]], Field(max_length=MAX_TOOLS), BeforeValidator(counted("tools", MAX_TOOLS))]


class ChatCompletionRequest(SamplingRequest):
    messages: ChatMessages
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    tools: Tools | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    # Variables for the chat template (vLLM's and OVMS's field), e.g. {"enable_thinking": false}.
    chat_template_kwargs: dict[str, Any] | None = None
    # vLLM's: open a new assistant turn (true, unless continue_final_message), or continue the last assistant message.
    add_generation_prompt: bool | None = None
    continue_final_message: bool = False
    # OpenAI's newer fields. reasoning_effort is the template's thinking switch, as the Responses API's
    # reasoning.effort (effort_variables); the others change nothing a self-hosted engine does, and are accepted as
    # vLLM accepts them: the cache is used whatever its key, one answer length is the model's own, an identifier is
    # for a hosted API's abuse checks, and text is the one modality out.
    reasoning_effort: Effort | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    modalities: list[Literal["text"]] | None = None
    # Biasing logits needs a logits processor, which the OpenVINO engine does not take (checked in request/sampling)
    logit_bias: dict[str, float] | None = None


class CompletionRequest(SamplingRequest):
    prompt: str | list[str] | list[int] | list[list[int]]
    # 0 (no new token) goes with `echo`: the prompt alone, scored with `logprobs` (checked by the server).
    max_tokens: Annotated[int, Field(ge=0)] | None = None
    logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    echo: bool = False
    suffix: str | None = None


class TokenizeCompletionRequest(OpenAIModel):
    model: str | None = None
    prompt: str
    add_special_tokens: bool = True
    return_token_strs: bool = False


class TokenizeChatRequest(OpenAIModel):
    model: str | None = None
    messages: ChatMessages
    add_generation_prompt: bool | None = None  # true, unless continue_final_message
    continue_final_message: bool = False  # vLLM's: the last (assistant) message is continued, not closed
    # The chat template adds the special tokens it wants; more only when asked (vLLM's default too).
    add_special_tokens: bool = False
    return_token_strs: bool = False
    tools: Tools | None = None
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
