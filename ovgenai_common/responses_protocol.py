"""OpenAI's Responses API request (`POST /v1/responses`) and its input read as a chat conversation: the one translation
through which both the backend and the gateway answer it on their chat paths.

A conversation's items are typed (messages, function calls, their outputs, reasoning), so a malformed item is a 400
naming its place (`input.2.call_id`); items this server does not take (`item_reference`, files, hosted tools) are
refused the same way. Output items a client sends back (as LangChain and the SDKs do) are read as input items."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, TypeAdapter, field_validator

from .protocol import MAX_CONTENT_PARTS, MAX_MESSAGES, MAX_TOOLS, OpenAIModel, counted

# Accepted and harmless on a self-hosted server: bookkeeping and caching hints of the hosted API.
IGNORED_RESPONSE_FIELDS = frozenset({"prompt_cache_key", "prompt_cache_retention", "safety_identifier"})
Effort = Literal["none", "minimal", "low", "medium", "high"]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class _Echoed(BaseModel):
    """An output item or part a client sends back: the server's own bookkeeping fields on it are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


class InputText(_Strict):
    type: Literal["input_text"]
    text: str


class OutputText(_Echoed):
    type: Literal["output_text"]
    text: str


class Refusal(_Echoed):
    type: Literal["refusal"]
    refusal: str


class InputImage(_Strict):
    """An image by URL or data URL (a file id needs OpenAI's file store: refused)."""

    type: Literal["input_image"]
    image_url: str
    detail: Literal["auto", "low", "high"] = "auto"


MessagePart = Annotated[InputText | OutputText | Refusal | InputImage, Field(discriminator="type")]
OutputPart = Annotated[InputText | InputImage, Field(discriminator="type")]


class MessageItem(_Strict):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[MessagePart]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(_Echoed):
    type: Literal["function_call"]
    call_id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    arguments: str


class FunctionCallOutputItem(_Echoed):
    type: Literal["function_call_output"]
    call_id: Annotated[str, Field(min_length=1)]
    output: str | list[OutputPart]


class ReasoningItem(_Echoed):
    """An earlier turn's reasoning: not shown to the model again (chat templates drop it from earlier turns)."""

    type: Literal["reasoning"]


def _item_type(item: Any) -> str:
    """An easy message (`{"role": ..., "content": ...}`) has no type: it is a message."""
    if isinstance(item, dict):
        return item.get("type", "message")
    return getattr(item, "type", "message")


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")] | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")] | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_type, custom_error_type="unsupported_item",
                  custom_error_message="This server takes input items of type message, function_call, "
                  "function_call_output and reasoning"),
]


class FunctionTool(_Strict):
    type: Literal["function"]
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    def as_chat(self) -> dict[str, Any]:
        """The tool as chat completions take it."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters or {"type": "object",
                                                                                        "properties": {}}}
        if self.description is not None:
            function["description"] = self.description
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


class NamedFunction(_Strict):
    type: Literal["function"]
    name: Annotated[str, Field(min_length=1)]


class TextFormat(_Strict):
    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    json_schema: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(_Strict):
    format: TextFormat | None = None
    verbosity: Literal["medium"] | None = None  # the only length this server can promise: the model's own


class ReasoningConfig(_Strict):
    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None  # the reasoning comes whole: no summary is made


class ResponsesStreamOptions(_Strict):
    include_obfuscation: bool = True  # OpenAI's random padding of events: none is added here either way


# Bounded before their items are validated (protocol.py)
InputItems = Annotated[
    list[InputItem], Field(max_length=MAX_MESSAGES),
    BeforeValidator(counted("input items", MAX_MESSAGES, MAX_CONTENT_PARTS)),
]
FunctionTools = Annotated[list[FunctionTool], Field(max_length=MAX_TOOLS), BeforeValidator(counted("tools", MAX_TOOLS))]


class ResponsesRequest(OpenAIModel):
    model: str | None = None
    input: str | InputItems
    instructions: str | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    tools: FunctionTools | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedFunction | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    previous_response_id: str | None = None
    # Accepted, asking for nothing here: log probabilities come only with an `include` this server does not offer,
    # and max_tool_calls bounds built-in tools (web search, ...), of which there are none.
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    # vLLM's sampling fields, as its chat completions take them (the same request model's, once translated)
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0, le=10)] | None = None
    seed: Annotated[int, Field(ge=-(2**63), le=2**64 - 1)] | None = None
    stop: str | list[str] | None = None
    ignore_eos: bool = False
    min_tokens: Annotated[int, Field(ge=0)] | None = None
    store: bool = True
    stream: bool = False
    stream_options: ResponsesStreamOptions | None = None
    truncation: Literal["disabled"] | None = None  # a conversation too long is a 400, never cut silently
    # Encrypted reasoning lets a stateless client send reasoning back; here reasoning comes in clear, so the
    # request for it asks for nothing more.
    include: list[Literal["reasoning.encrypted_content"]] | None = None
    background: bool | None = None  # true is refused: a response is answered while the request waits

    def unknown_fields(self) -> list[str]:
        return sorted(set(super().unknown_fields()) - IGNORED_RESPONSE_FIELDS)

    @field_validator("background")
    @classmethod
    def _answered_in_the_request(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError("background responses are not served: a response is answered while the request waits")
        return value


def _text(parts: str | list[Any]) -> str:
    if isinstance(parts, str):
        return parts
    return "".join(p.text if isinstance(p, InputText | OutputText) else p.refusal if isinstance(p, Refusal) else ""
                   for p in parts)


def _content(parts: str | list[Any]) -> str | list[dict[str, Any]]:
    """A message's content for a chat message: text, or text and image parts where it has images."""
    if isinstance(parts, str) or not any(isinstance(p, InputImage) for p in parts):
        return _text(parts)
    return [{"type": "image_url", "image_url": {"url": p.image_url, "detail": p.detail}} if isinstance(p, InputImage)
            else {"type": "text", "text": _text([p])} for p in parts]


def chat_messages(items: str | list[Any]) -> list[dict[str, Any]]:
    """Input items (or a response's output items) as chat messages: a function call joins the assistant turn before it
    (or opens one), its output is a `tool` message."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, MessageItem):
            messages.append({"role": item.role, "content": _content(item.content)})
        elif isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments}}
            if not messages or messages[-1]["role"] != "assistant" or not isinstance(messages[-1]["content"], str):
                messages.append({"role": "assistant", "content": None})
            messages[-1].setdefault("tool_calls", []).append(call)
        elif isinstance(item, FunctionCallOutputItem):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": _text(item.output)})
    return messages


_OUTPUT_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(list[InputItem])


def output_messages(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's output items as the chat messages the next turn reads (its reasoning left out)."""
    return chat_messages(_OUTPUT_ITEMS.validate_python(output))


def chat_body(request: ResponsesRequest, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat completion request that answers `request`: its instructions as the system message, the earlier turns
    (`previous_response_id`'s conversation, `history`), its input, its sampling, tools and text format."""
    messages = [{"role": "system", "content": request.instructions}] if request.instructions else []
    body: dict[str, Any] = {"messages": messages + history + chat_messages(request.input)}
    for name, value in (("model", request.model), ("max_completion_tokens", request.max_output_tokens),
                        ("temperature", request.temperature), ("top_p", request.top_p),
                        ("parallel_tool_calls", request.parallel_tool_calls), ("top_k", request.top_k),
                        ("min_p", request.min_p), ("repetition_penalty", request.repetition_penalty),
                        ("seed", request.seed), ("stop", request.stop), ("min_tokens", request.min_tokens)):
        if value is not None:
            body[name] = value
    if request.ignore_eos:
        body["ignore_eos"] = True
    if request.tools:
        body["tools"] = [tool.as_chat() for tool in request.tools]
    if isinstance(request.tool_choice, NamedFunction):
        body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice.name}}
    elif request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    text_format = request.text.format if request.text is not None else None
    if text_format is not None and text_format.type == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": text_format.name or "response", "schema": text_format.json_schema or {},
            "strict": bool(text_format.strict)}}
    elif text_format is not None and text_format.type == "json_object":
        body["response_format"] = {"type": "json_object"}
    if request.reasoning is not None and request.reasoning.effort is not None:
        body["reasoning_effort"] = request.reasoning.effort  # chat's own field: the same switch (effort_variables)
    return body


def effort_variables(effort: str | None) -> dict[str, Any]:
    """A reasoning effort as the chat template's variables, as vLLM passes it: "none" (and "minimal") turn a thinking
    model's thinking off (Qwen3's enable_thinking); the others reach templates that read reasoning_effort."""
    if effort is None:
        return {}
    return {"enable_thinking": False} if effort in ("none", "minimal") else {"reasoning_effort": effort}
