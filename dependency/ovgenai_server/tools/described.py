"""Tools for a model whose chat template has no tool syntax, in llama.cpp's "generic" form: the tools are described in
the system message, and the answer is held by a grammar to a JSON object, `{"tool_calls": [...]}` or
`{"response": "..."}` (tool_choice "auto": the model chooses), or to a call ("required", a named function:
tool_calls.forced_call_schema). The conversation's earlier calls and their results are written the same way, as
messages any template takes. `DescribedCalls` reads the answer back as it streams."""

from __future__ import annotations

import json
import re
from typing import Any

from .calls import Event, ForcedCalls, Text, forced_call_schema

_EXAMPLE = {"tool_calls": [{"name": "tool_name", "parameters": {"argument": "value"}}]}


def describe(tools: list[dict[str, Any]], parallel: bool) -> str:
    """The system message's part that tells the model its tools and how to call them."""
    functions = [tool["function"] for tool in tools]
    calls = "one or more calls" if parallel else "one call"
    return (f"You can call the following tools to answer the user's request:\n{json.dumps(functions, indent=2)}\n\n"
            f"To call tools, answer with a JSON object holding {calls}, e.g.\n{json.dumps(_EXAMPLE, indent=2)}\n"
            'To answer without a tool, answer with {"response": "your answer"}. A tool\'s results come back in a '
            'message {"tool_responses": [...]}.')


def auto_schema(tools: list[dict[str, Any]], parallel: bool) -> dict[str, Any]:
    """The JSON schema of an answer that is either calls or a response."""
    calls = forced_call_schema(tools, None, parallel)
    definitions = calls.pop("$defs", None)
    schema: dict[str, Any] = {"anyOf": [
        {"type": "object", "properties": {"tool_calls": calls}, "required": ["tool_calls"],
         "additionalProperties": False},
        {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"],
         "additionalProperties": False},
    ]}
    if definitions:  # the calls' references point at the root's definitions (tool_calls._rebased)
        schema["$defs"] = definitions
    return schema


def described(messages: list[dict[str, Any]], description: str) -> list[dict[str, Any]]:
    """The conversation as a template without tool syntax takes it: the tools' description leads the system message,
    an assistant's calls are its content, written as the model writes them, and tool results are a user message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool":
            result = {"tool_call_id": message.get("tool_call_id"), "content": message.get("content")}
            if out and out[-1].get("_results") is not None:  # results of one turn's calls go in one message
                out[-1]["_results"].append(result)
            else:
                out.append({"role": "user", "_results": [result]})
        elif message["role"] == "assistant" and message.get("tool_calls"):
            calls = [{"name": call["function"]["name"], "parameters": _arguments(call["function"]["arguments"])}
                     for call in message["tool_calls"]]
            out.append({"role": "assistant", "content": json.dumps({"tool_calls": calls}, ensure_ascii=False)})
        else:
            out.append(dict(message))
    for message in out:
        if (results := message.pop("_results", None)) is not None:
            message["content"] = json.dumps({"tool_responses": results}, ensure_ascii=False)
    if out and out[0]["role"] == "system":
        return [{**out[0], "content": f"{out[0]['content']}\n\n{description}"}, *out[1:]]
    return [{"role": "system", "content": description}, *out]


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # checked as JSON text when the request was read; kept as it came otherwise
        return text


_HEADS = (("response", re.compile(r'\s*\{\s*"response"\s*:\s*"')),
          ("tool_calls", re.compile(r'\s*\{\s*"tool_calls"\s*:')))
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class DescribedCalls:
    """The answer of a request with described tools and tool_choice "auto", piece by piece: the response's text as it
    comes, or the calls, each once it is whole (tool_calls.ForcedCalls)."""

    def __init__(self) -> None:
        self._head = ""  # the answer until its key is known
        self._mode: str | None = None
        self._calls = ForcedCalls(None)
        self._string = _JSONString()

    @property
    def calls(self) -> int:
        return self._calls.calls

    def feed(self, piece: str) -> list[Event]:
        if self._mode is None:
            self._head += piece
            for mode, head in _HEADS:
                if (match := head.match(self._head)) is not None:
                    self._mode, piece, self._head = mode, self._head[match.end():], ""
                    break
            else:
                return []
        if self._mode == "tool_calls":
            return self._calls.feed(piece)
        text = self._string.feed(piece)
        return [Text(text)] if text else []

    def finish(self) -> list[Event]:
        if self._mode == "tool_calls":
            return self._calls.finish()
        if self._mode is None and self._head.strip():  # cut short before its key (max_tokens): the text as it is
            return [Text(self._head)]
        return []


class _JSONString:
    """A JSON string's text decoded as it streams (its opening quote already read), up to its closing quote."""

    def __init__(self) -> None:
        self._escape = ""  # an escape not yet whole: "\", "\u12" ...
        self._high: int | None = None  # a high surrogate waiting for its low half
        self.closed = False

    def feed(self, piece: str) -> str:
        out: list[str] = []
        for char in piece:
            if self.closed:
                break
            if self._escape:
                self._escape += char
                if self._escape[1] != "u":
                    out.append(_ESCAPES.get(char, char))
                    self._escape = ""
                elif len(self._escape) == 6:
                    out.append(self._code(int(self._escape[2:], 16)))
                    self._escape = ""
            elif char == "\\":
                self._escape = char
            elif char == '"':
                self.closed = True
            else:
                out.append(char)
        return "".join(out)

    def _code(self, code: int) -> str:
        """A \\u escape's character; a surrogate pair's halves joined, a lone half dropped (no encoder takes it)."""
        if 0xD800 <= code < 0xDC00:
            self._high = code
            return ""
        high, self._high = self._high, None
        if 0xDC00 <= code < 0xE000:
            return chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)) if high is not None else ""
        return chr(code)

