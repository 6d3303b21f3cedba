"""Anthropic's Messages API request (`POST /v1/messages`, `/v1/messages/count_tokens`), and how it reads as a chat
completion: `system` as the system message, content blocks as chat messages (a `tool_use` block as an assistant's
tool call, a `tool_result` block as a `tool` message), tools, `tool_choice`, `stop_sequences` and `thinking`.

Blocks are typed, so a malformed one is a 400 naming its place; blocks this server does not take (documents, search
results, server tools) are refused the same way."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from ovgenai_common.protocol import MAX_CONTENT_PARTS, MAX_MESSAGES, MAX_TOOLS, OpenAIModel, counted

from .protocol import MAX_STOP_LENGTH, MAX_STOP_STRINGS

# Accepted and harmless: bookkeeping and placement on the hosted API.
IGNORED_ANTHROPIC_FIELDS = frozenset({"service_tier", "inference_geo", "user_profile_id", "workspace_id"})


class _Block(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class CacheControl(_Block):
    """Anthropic's prompt-caching marker: the prefix cache here reuses shared prefixes on its own."""

    type: Literal["ephemeral"]
    ttl: str | None = None


class TextBlock(_Block):
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None
    citations: list[Any] | None = None


class Base64Source(_Block):
    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class URLSource(_Block):
    type: Literal["url"]
    url: str


class ImageBlock(_Block):
    type: Literal["image"]
    source: Annotated[Base64Source | URLSource, Field(discriminator="type")]
    cache_control: CacheControl | None = None

    def url(self) -> str:
        source = self.source
        return source.url if isinstance(source, URLSource) else f"data:{source.media_type};base64,{source.data}"


class ToolUseBlock(_Block):
    type: Literal["tool_use"]
    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class ToolResultBlock(_Block):
    type: Literal["tool_result"]
    tool_use_id: Annotated[str, Field(min_length=1)]
    content: str | list[Annotated[TextBlock | ImageBlock, Field(discriminator="type")]] = ""
    is_error: bool = False
    cache_control: CacheControl | None = None

    def text(self) -> str:
        text = self.content if isinstance(self.content, str) else "".join(
            block.text for block in self.content if isinstance(block, TextBlock))
        return f"Error: {text}" if self.is_error else text


class ThinkingBlock(_Block):
    """An earlier turn's thinking: not shown to the model again (chat templates drop it from earlier turns)."""

    model_config = ConfigDict(strict=True, extra="ignore")
    type: Literal["thinking", "redacted_thinking"]


ContentBlock = Annotated[TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock,
                         Field(discriminator="type")]


class Message(_Block):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class Tool(_Block):
    """A client tool (Anthropic's server tools, `bash_…`, `web_search_…`, need Anthropic's servers: refused)."""

    type: Literal["custom"] | None = None
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    input_schema: dict[str, Any]
    cache_control: CacheControl | None = None

    def as_chat(self) -> dict[str, Any]:
        function = {"name": self.name, "parameters": self.input_schema}
        if self.description is not None:
            function["description"] = self.description
        return {"type": "function", "function": function}


class ToolChoice(_Block):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class Thinking(_Block):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: Annotated[int, Field(ge=1)] | None = None  # not enforced: the model thinks within max_tokens


class JSONFormat(_Block):
    type: Literal["json_schema"]
    json_schema: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Block):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JSONFormat | None = None


# Bounded before their items are validated (ovgenai_common/protocol.py)
Messages = Annotated[
    list[Message], Field(min_length=1, max_length=MAX_MESSAGES),
    BeforeValidator(counted("messages", MAX_MESSAGES, MAX_CONTENT_PARTS)),
]
SystemBlocks = Annotated[
    list[TextBlock], Field(max_length=MAX_CONTENT_PARTS), BeforeValidator(counted("system blocks", MAX_CONTENT_PARTS))
]
Tools = Annotated[list[Tool], Field(max_length=MAX_TOOLS), BeforeValidator(counted("tools", MAX_TOOLS))]


class CountTokensRequest(OpenAIModel):
    model: str | None = None
    messages: Messages
    system: str | SystemBlocks | None = None
    tools: Tools | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    cache_control: CacheControl | None = None
    speed: Literal["standard"] | None = None

    def unknown_fields(self) -> list[str]:
        return sorted(set(super().unknown_fields()) - IGNORED_ANTHROPIC_FIELDS)


class MessagesRequest(CountTokensRequest):
    max_tokens: Annotated[int, Field(ge=1)]
    stop_sequences: Annotated[list[Annotated[str, StringConstraints(max_length=MAX_STOP_LENGTH)]],
                              Field(max_length=MAX_STOP_STRINGS)] | None = None
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=1)] | None = None
    stream: bool = False


def _chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Content blocks as chat messages: a user turn's tool results first, as `tool` messages, then its text and
    images; an assistant turn's text, then its tool calls."""
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [TextBlock(type="text", text=message.content)] if isinstance(message.content, str) else message.content
        for result in (block for block in blocks if isinstance(block, ToolResultBlock)):
            out.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": result.text()})
        parts: list[dict[str, Any]] = [
            {"type": "text", "text": block.text} if isinstance(block, TextBlock)
            else {"type": "image_url", "image_url": {"url": block.url()}}
            for block in blocks if isinstance(block, TextBlock | ImageBlock)]
        calls = [{"id": block.id, "type": "function",
                  "function": {"name": block.name, "arguments": json.dumps(block.input)}}
                 for block in blocks if isinstance(block, ToolUseBlock)]
        content: str | list[dict[str, Any]] | None = parts
        if all(part["type"] == "text" for part in parts):
            content = "".join(part["text"] for part in parts)
        if message.role == "assistant" and (content or calls):
            out.append({"role": "assistant", "content": content or None, **({"tool_calls": calls} if calls else {})})
        elif message.role == "user" and content:
            out.append({"role": "user", "content": content})
    return out


def _tool_choice(choice: ToolChoice | None) -> dict[str, Any]:
    if choice is None:
        return {}
    fields: dict[str, Any] = {}
    if choice.disable_parallel_tool_use is not None:
        fields["parallel_tool_calls"] = not choice.disable_parallel_tool_use
    if choice.type == "tool":
        fields["tool_choice"] = {"type": "function", "function": {"name": choice.name or ""}}
    else:
        fields["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
    return fields


def chat_body(request: CountTokensRequest) -> dict[str, Any]:
    """The chat completion request that answers (or counts) `request`."""
    system = request.system if isinstance(request.system, str) or request.system is None else "\n\n".join(
        block.text for block in request.system)
    body: dict[str, Any] = {"model": request.model,
                            "messages": ([{"role": "system", "content": system}] if system else [])
                            + _chat_messages(request.messages)}
    if request.tools:
        body["tools"] = [tool.as_chat() for tool in request.tools]
        body.update(_tool_choice(request.tool_choice))
    variables: dict[str, Any] = {}  # for the chat template, as vLLM passes them
    if request.thinking is not None:
        variables["enable_thinking"] = request.thinking.type != "disabled"
    output = request.output_config
    if output is not None and output.effort is not None:
        variables["reasoning_effort"] = output.effort
    if variables:
        body["chat_template_kwargs"] = variables
    if output is not None and output.format is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "output",
                                                                          "schema": output.format.json_schema}}
    if isinstance(request, MessagesRequest):
        body["max_tokens"] = request.max_tokens
        for name, value in (("stop", request.stop_sequences), ("temperature", request.temperature),
                            ("top_p", request.top_p), ("top_k", request.top_k)):
            if value is not None:
                body[name] = value
    return body
