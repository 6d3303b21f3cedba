"""Tool calls in model output: Hermes/Qwen `<tool_call>{json}</tool_call>` blocks, or one bare JSON object
`{"name": ..., "arguments"|"parameters": {...}}` (Llama 3 style)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

_TAGGED = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def _call(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": obj["name"], "arguments": arguments},
    }


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(remaining content or None, tool calls) for a finished completion."""
    calls = []
    for match in _TAGGED.finditer(text):
        try:
            call = _call(json.loads(match.group(1)))
        except (ValueError, RecursionError):  # the model's text: anything but a call is left as text
            call = None
        if call:
            calls.append(call)
    if calls:
        rest = _TAGGED.sub("", text).strip()
        return (rest or None), calls
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            call = _call(json.loads(stripped))
        except (ValueError, RecursionError):  # the model's text: anything but a call is left as text
            call = None
        if call:
            return None, [call]
    return text, []
