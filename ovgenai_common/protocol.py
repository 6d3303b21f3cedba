"""OpenAI wire-protocol request models (pydantic only, no logic).

Unknown fields are kept (`extra="allow"`) so that the serving layer can name them in a 400 instead of silently
ignoring them; a handful that change nothing for a self-hosted server are tolerated (see IGNORED_FIELDS).
Values are validated strictly (no `0.0` for a boolean, no `"5"` for an integer), so the OpenAPI document these
models generate is exactly what the server accepts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import invalid

# Accepted and harmless: they carry bookkeeping for hosted APIs, not generation behaviour.
IGNORED_FIELDS = frozenset({"user", "metadata", "store", "service_tier"})
# The engine holds sampling values as 32-bit floats: past float32's range a value becomes infinity, and below its
# smallest normal number a denormal or zero, which the engine then computes into garbage text or refuses.
FLOAT32_SMALLEST_NORMAL = 2.0**-126
FLOAT32_LARGEST = 3.4028234663852886e38


def closed_schema(schema: dict[str, Any]) -> None:
    """What the OpenAPI document says of a request body whose unknown fields are kept only to be named in a 400:
    no other properties are accepted (so clients and fuzzers generate only what the server takes)."""
    schema["additionalProperties"] = False
    properties = schema.setdefault("properties", {})
    for name in sorted(IGNORED_FIELDS):
        properties.setdefault(name, {"description": "accepted and ignored"})


class OpenAIModel(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, json_schema_extra=closed_schema)

    def unknown_fields(self) -> list[str]:
        return sorted(set(self.model_extra or {}) - IGNORED_FIELDS)

    def refuse_unknown_fields(self) -> None:
        """A 400 naming the first field this server does not take (kept by `extra="allow"` to be named here)."""
        unknown = self.unknown_fields()
        if unknown:
            raise invalid(f"Unsupported parameter(s): {', '.join(unknown)}.", unknown[0])


class TextPart(BaseModel):
    model_config = ConfigDict(strict=True)

    type: Literal["text"]
    text: str


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


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
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


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool = False
    include_obfuscation: bool = True  # OpenAI's random padding of stream chunks: none is added here either way


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


class ChatCompletionRequest(SamplingRequest):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    # Variables for the chat template (vLLM's and OVMS's field), e.g. {"enable_thinking": false}.
    chat_template_kwargs: dict[str, Any] | None = None
    # vLLM's: open a new assistant turn (true, unless continue_final_message), or continue the last assistant message.
    add_generation_prompt: bool | None = None
    continue_final_message: bool = False


class CompletionRequest(SamplingRequest):
    prompt: str | list[str] | list[int] | list[list[int]]
    # 0 (no new token) goes with `echo`: the prompt alone, scored with `logprobs` (checked by the server).
    max_tokens: Annotated[int, Field(ge=0)] | None = None
    logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    echo: bool = False
    suffix: str | None = None
