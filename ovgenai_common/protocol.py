"""What every service's OpenAI request models share (pydantic only, no logic): the base model, text parts, stream
options, and the float32 bound of sampling values. Each service's own requests are in its protocol.py.

Unknown fields are kept (`extra="allow"`) so that the serving layer can name them in a 400 instead of silently
ignoring them; a handful that change nothing for a self-hosted server are tolerated (see IGNORED_FIELDS).
Values are validated strictly (no `0.0` for a boolean, no `"5"` for an integer), so the OpenAPI document these
models generate is exactly what the server accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .errors import invalid

# Accepted and harmless: they carry bookkeeping for hosted APIs, not generation behaviour.
IGNORED_FIELDS = frozenset({"user", "store", "service_tier"})
# The engine holds sampling values as 32-bit floats: past float32's range a value becomes infinity, and below its
# smallest normal number a denormal or zero, which the engine then computes into garbage text or refuses.
FLOAT32_SMALLEST_NORMAL = 2.0**-126


def closed_schema(schema: dict[str, Any]) -> None:
    """What the OpenAPI document says of a request body whose unknown fields are kept only to be named in a 400:
    no other properties are accepted (so clients and fuzzers generate only what the server takes)."""
    schema["additionalProperties"] = False
    properties = schema.setdefault("properties", {})
    for name in sorted(IGNORED_FIELDS):
        properties.setdefault(name, {"description": "accepted and ignored"})


# What a request may hold, counted before anything of it is validated or rendered: a body of many small items took
# the event loop for seconds while it was validated (a request's validation holds the interpreter throughout).
# OpenAI's bounds on messages and tools; the content parts of all the messages together.
MAX_MESSAGES = 2048
MAX_CONTENT_PARTS = 4096
MAX_TOOLS = 128


def counted(what: str, limit: int, parts: int | None = None) -> Callable[[Any], Any]:
    """A list field's check before its items are validated: at most `limit` items and, with `parts`, at most that
    many list `content` parts in its items together (a 400 naming the field)."""

    def check(value: Any) -> Any:
        if isinstance(value, list):
            if len(value) > limit:
                raise ValueError(f"at most {limit} {what} are accepted, not {len(value)}")
            if parts is not None:
                total = sum(len(item["content"]) for item in value
                            if isinstance(item, dict) and isinstance(item.get("content"), list))
                if total > parts:
                    raise ValueError(f"at most {parts} content parts are accepted in all the {what}, not {total}")
        return value

    return check


# OpenAI's bounds on `metadata`: at most 16 pairs, keys of at most 64 characters and values of at most 512. It is
# stored with a response and echoed back, so past them it is memory anyone could fill.
Metadata = Annotated[
    dict[Annotated[str, StringConstraints(max_length=64)], Annotated[str, StringConstraints(max_length=512)]],
    Field(max_length=16),
]


class OpenAIModel(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, json_schema_extra=closed_schema)

    metadata: Metadata | None = None  # bookkeeping for the client: kept with a stored response, never generated from

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


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool = False
    include_obfuscation: bool = True  # OpenAI's random padding of stream chunks: none is added here either way
