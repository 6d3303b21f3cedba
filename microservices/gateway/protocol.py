"""Requests of the gateway: OPEA's ChatQnA body (messages may be a string, stream defaults to true) and the
OpenAI chat body."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    role: Literal["system", "developer", "user", "assistant"]
    content: str


class ChatQnARequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messages: str | Annotated[list[Message], Field(min_length=1)]
    model: str | None = None
    stream: bool = True
    max_tokens: Annotated[int, Field(ge=1, le=8192)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    k: Annotated[int, Field(ge=1, le=50)] | None = None
    top_k: Annotated[int, Field(ge=1, le=50)] | None = None

    def turns(self) -> list[dict[str, str]]:
        if isinstance(self.messages, str):
            return [{"role": "user", "content": self.messages}]
        return [{"role": m.role, "content": m.content} for m in self.messages]


class ChatCompletionRequest(ChatQnARequest):
    stream: bool = False


class DeleteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_path: str = Field(description="A document name, or 'all'.")


class RetrieveRequest(BaseModel):
    # Strict: a field the gateway does not know, or `true` for a number, is a client's mistake worth a 400.
    model_config = ConfigDict(extra="forbid", strict=True)

    query: Annotated[str, Field(min_length=1)]
    k: Annotated[int, Field(ge=1, le=50)] | None = None
