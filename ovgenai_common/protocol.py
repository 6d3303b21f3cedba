"""What every service's OpenAI request models share (pydantic only, no logic): the base model, text parts, stream
options, and the float32 bound of sampling values. Each service's own requests are in its protocol.py.

Unknown fields are kept (`extra="allow"`) so that the serving layer can name them in a 400 instead of silently
ignoring them; a handful that change nothing for a self-hosted server are tolerated (see IGNORED_FIELDS).
Values are validated strictly (no `0.0` for a boolean, no `"5"` for an integer), so the OpenAPI document these
models generate is exactly what the server accepts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .errors import invalid

# Accepted and harmless: they carry bookkeeping for hosted APIs, not generation behaviour.
IGNORED_FIELDS = frozenset({"user", "metadata", "store", "service_tier"})
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


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool = False
    include_obfuscation: bool = True  # OpenAI's random padding of stream chunks: none is added here either way
