"""Tool calls in a model's output, parsed as it streams; and the grammar that forces a call.

A model writes its calls in the format its chat template taught it (the model's `tool_parser`, OVMS's and vLLM's
names):

- `hermes3` (vLLM: `hermes`): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, text allowed around
  them (Hermes, Qwen 2.5 and 3, SmolLM3). Text before a block streams as it comes; each call goes out when its block
  closes.
- `llama3` (vLLM: `llama3_json`): the whole answer is one or more `{"name": ..., "parameters": {...}}` objects
  separated by `;`, after an optional `<|python_tag|>` (Llama 3.1 and 3.2).
- `pythonic` (vLLM: `pythonic`): the whole answer is a Python list of calls, `[get_weather(city="Paris"), ...]`
  (Llama 3.2 and 4).
- `auto`, for a template that shows no format: `hermes3` blocks, or a whole answer that is `llama3` JSON.

openvino_genai 2026.4 ships parsers for the Llama 3 formats, but they are not used: its `Llama3PythonicToolParser`
turns `[a(x=1), b(y=2)]` into one call named `a` with both calls' arguments, and its `Llama3JsonToolParser` throws
(naming the library's source files) on an answer with any text beside the JSON. Python's own `json` and `ast` parse
these formats exactly.

With `tool_choice` "required" or a named function the model's format does not matter: the output is constrained by
a JSON schema (checked before admission like any other grammar), as vLLM does it: a named function's arguments
object, or a non-empty array of `{"name", "parameters"}` calls.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from .tags import held_prefix

ToolFormat = Literal["hermes3", "llama3", "pythonic", "auto"]
# The names the OVMS and vLLM guides type, for the formats above.
TOOL_PARSERS: dict[str, ToolFormat] = {
    "hermes3": "hermes3", "hermes": "hermes3", "qwen3": "hermes3",
    "llama3": "llama3", "llama3_json": "llama3",
    "pythonic": "pythonic", "llama4_pythonic": "pythonic",
    "auto": "auto",
}

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_PYTHON_TAG = "<|python_tag|>"


def detect_tool_format(template: str) -> ToolFormat:
    """The format a chat template teaches its model, for a model served without a `tool_parser`."""
    if _OPEN in template:
        return "hermes3"
    if _PYTHON_TAG in template or '"parameters": ' in template:
        return "llama3"
    return "auto"


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class CallDelta:
    """A piece of the `index`th call: its first piece carries the id and name; `arguments` are JSON text."""

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None

    def as_delta(self) -> dict[str, Any]:
        """The piece as an OpenAI stream's `tool_calls` entry."""
        function: dict[str, Any] = {"arguments": self.arguments}
        if self.name is not None:
            function = {"name": self.name, **function}
        head = {"id": self.id, "type": "function"} if self.id is not None else {}
        return {"index": self.index, **head, "function": function}


Event = Text | CallDelta


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _json_call(obj: Any, index: int) -> CallDelta | None:
    """A `{"name": ..., "arguments"|"parameters": {...}}` object as a whole call; None for anything else."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as JSON text
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return CallDelta(index, json.dumps(arguments, ensure_ascii=False), _call_id(), obj["name"])


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # the model's text: anything but a call stays text
        return None


def _llama3_calls(text: str) -> list[CallDelta] | None:
    """`{...}; {...}` (after an optional python tag) as calls; None unless the whole text is calls."""
    text = text.strip().removeprefix(_PYTHON_TAG).strip()
    decoder, position = json.JSONDecoder(), 0
    calls: list[CallDelta] = []
    while position < len(text):
        try:
            obj, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            return None
        call = _json_call(obj, len(calls))
        if call is None:
            return None
        calls.append(call)
        while position < len(text) and (text[position].isspace() or text[position] == ";"):
            position += 1
    return calls or None


def _pythonic_calls(text: str) -> list[CallDelta] | None:
    """`[f(a=1), g.h(b="x")]` as calls (keyword arguments with literal values only); None unless the whole text is."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return None
    calls: list[CallDelta] = []
    for node in tree.body.elts:
        if not isinstance(node, ast.Call) or node.args:
            return None
        try:
            name = ast.unparse(node.func)
            arguments = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return None
        if None in arguments or not name.replace(".", "").replace("_", "").isalnum():
            return None
        try:
            arguments_json = json.dumps(arguments, ensure_ascii=False)
        except (TypeError, ValueError):  # a set or bytes literal: not JSON
            return None
        calls.append(CallDelta(len(calls), arguments_json, _call_id(), name))
    return calls


def _whole_calls(tool_format: ToolFormat, text: str) -> list[CallDelta] | None:
    return _pythonic_calls(text) if tool_format == "pythonic" else _llama3_calls(text)


class ToolCallParser:
    """One choice's output split into text and calls, piece by piece: `feed` each piece, then `finish`.

    Trailing whitespace is held back until text follows it, so that the blank lines around calls are not sent. A
    block's text, or a whole answer, is collected in pieces and searched only where it grew, so that a long one costs
    its length, not its square."""

    def __init__(self, tool_format: ToolFormat, parallel: bool = True):
        self.format = tool_format
        self.parallel = parallel
        self.calls = 0
        self._pending = ""  # text not read yet (inside a block: with the end of the last piece a tag may span)
        self._collected: list[str] = []  # the open block's text, or the whole answer, read so far
        # start: nothing seen yet; text: looking for blocks; plain: text only; block: inside a block;
        # whole: the whole answer is to be parsed as calls when it ends.
        self._mode: Literal["start", "text", "plain", "block", "whole"] = "start"
        self._space = ""

    def feed(self, piece: str) -> list[Event]:
        if self._mode == "whole":
            self._collected.append(piece)
            return []
        self._pending += piece
        events: list[Event] = []
        while True:
            if self._mode == "start" and not self._begin():
                return events
            if self._mode == "whole":
                self._collected, self._pending = [self._pending], ""
                return events
            if self._mode == "plain":
                events += self._text(self._pending)
                self._pending = ""
                return events
            if self._mode == "text":
                at = self._pending.find(_OPEN)
                if at < 0:
                    keep = held_prefix(self._pending, _OPEN)
                    events += self._text(self._pending[: len(self._pending) - keep])
                    self._pending = self._pending[len(self._pending) - keep:]
                    return events
                events += self._text(self._pending[:at])
                self._pending, self._mode = self._pending[at + len(_OPEN):], "block"
                continue
            at = self._pending.find(_CLOSE)  # inside a block
            if at < 0:
                searched = max(0, len(self._pending) - len(_CLOSE) + 1)
                self._collected.append(self._pending[:searched])
                self._pending = self._pending[searched:]
                return events
            body = "".join(self._collected) + self._pending[:at]
            self._collected, self._pending, self._mode = [], self._pending[at + len(_CLOSE):], "text"
            events += self._block(body, closed=True)

    def _begin(self) -> bool:
        """Whether the format's way of reading the answer is decided (by its first characters)."""
        head = self._pending.lstrip()
        starts = {"llama3": ("{", _PYTHON_TAG), "pythonic": ("[",), "auto": ("{",)}.get(self.format, ())
        if not head or any(start.startswith(head) and start != head for start in starts):
            return False  # too early to say
        if any(head.startswith(start) for start in starts):
            self._mode = "whole"
        else:
            self._mode = "text" if self.format in ("hermes3", "auto") else "plain"
        return True

    def finish(self) -> list[Event]:
        rest = "".join(self._collected) + self._pending
        self._collected, self._pending = [], ""
        events: list[Event] = []
        if self._mode == "block":
            events = self._block(rest, closed=False)
        elif self._mode == "whole" and (calls := _whole_calls(self.format, rest)):
            events = self._take(calls)
        else:
            events = self._text(rest)
        if self._space and not self.calls:
            events.append(Text(self._space))
        self._space = ""
        return events

    def _block(self, body: str, closed: bool) -> list[Event]:
        call = _json_call(_loads(body.strip()), self.calls)
        if call is None:  # not a call after all: the block is text, as the model wrote it
            return self._text(_OPEN + body + (_CLOSE if closed else ""))
        return self._take([call])

    def _take(self, calls: list[CallDelta]) -> list[Event]:
        events: list[Event] = []
        self._space = ""
        for call in calls:
            if self.calls and not self.parallel:
                break  # parallel_tool_calls false: the first call only
            events.append(CallDelta(self.calls, call.arguments, call.id, call.name))
            self.calls += 1
        return events

    def _text(self, text: str) -> list[Event]:
        text = self._space + text
        body = text.rstrip()
        self._space = text[len(body):]
        return [Text(body)] if body else []


# The characters that change where a JSON text is: nesting, and strings (inside which only quotes and escapes count).
_JSON_STRUCTURE = re.compile(r'[][{}"\\]')


class ForcedCalls:
    """The output of a request whose `tool_choice` forced a call (see `forced_call_schema`), piece by piece.

    A named function's output is its arguments object, streamed as it comes; "required" gives an array of calls,
    each sent once it is complete. The array is read in one pass (its nesting and strings tracked as the pieces come),
    so that each call is decoded once, when it closes, however long the output."""

    def __init__(self, function: str | None):
        self.function = function
        self.calls = 0
        self._text: list[str] = []  # the whole output, for an answer cut short before any call
        self._element: list[str] = []  # the array element being read
        self._opened = False  # past the array's "["
        self._depth = 0  # nesting inside the element
        self._string = self._escaped = False

    def feed(self, piece: str) -> list[Event]:
        if not piece:
            return []
        if self.function is not None:
            first = self.calls == 0
            self.calls = 1
            return [CallDelta(0, piece, _call_id(), self.function) if first else CallDelta(0, piece)]
        self._text.append(piece)
        return self._elements(piece)

    def finish(self) -> list[Event]:
        if self.function is not None:
            return [] if self.calls else [CallDelta(0, "{}", _call_id(), self.function)]
        text = "".join(self._text)
        if not self.calls and text.strip():  # cut short before a whole call (max_tokens): the text as it is
            return [Text(text)]
        return []

    def _elements(self, piece: str) -> list[Event]:
        events: list[Event] = []
        position = 0
        if not self._opened:
            position = piece.find("[") + 1
            if not position:
                return events
            self._opened = True
        start = position if self._depth else None  # where the element's text in this piece starts
        if self._escaped:  # the last piece ended on a backslash inside a string: this piece starts with what it escapes
            position, self._escaped = position + 1, False
        while (match := _JSON_STRUCTURE.search(piece, position)) is not None:
            char, at = match.group(), match.start()
            position = at + 1
            if self._string:
                if char == "\\":
                    position = at + 2
                    self._escaped = position > len(piece)
                elif char == '"':
                    self._string = False
            elif char == '"':
                self._string = True
            elif char in "[{":
                if not self._depth:
                    start = at
                self._depth += 1
            elif self._depth:  # "]" or "}"
                self._depth -= 1
                if not self._depth:
                    self._element.append(piece[start:at + 1])
                    call = _json_call(_loads("".join(self._element)), self.calls)
                    self._element, start = [], None
                    if call is not None:
                        events.append(call)
                        self.calls += 1
        if self._depth and start is not None:
            self._element.append(piece[start:])
        return events


# A function declared without parameters takes none (OpenAI's meaning): its arguments are `{}`. "Any object" let a
# forced call fill them with whatever it liked, nested without end.
NO_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}


def forced_call_schema(tools: list[dict[str, Any]], function: str | None, parallel: bool) -> dict[str, Any]:
    """The JSON schema a forced call's output follows: the named function's parameters, or (tool_choice "required")
    an array of at least one `{"name", "parameters"}` call to any of the tools.

    In the array a tool's parameters are no longer the root that their references into themselves (`#/$defs/...`,
    as pydantic and the openai SDK write nested models, or `#`) name: such a tool's parameters go under the array's
    `$defs`, their references rewritten to point there, so that each tool keeps its own definitions (two tools may
    each define a `Place`). The compiler follows a reference through objects only, not array indices."""
    parameters = {tool["function"]["name"]: tool["function"].get("parameters") or NO_PARAMETERS for tool in tools}
    if function is not None:
        return parameters[function]
    definitions: dict[str, Any] = {}
    calls = []
    for index, (name, schema) in enumerate(parameters.items()):
        key = f"tool{index}"
        rebased = _rebased(schema, f"#/$defs/{key}")
        if rebased is not None:
            definitions[key], schema = rebased, {"$ref": f"#/$defs/{key}"}
        properties = {"name": {"type": "string", "enum": [name]}, "parameters": schema}
        calls.append({"type": "object", "properties": properties, "required": ["name", "parameters"]})
    array: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"anyOf": calls}}
    if not parallel:
        array["maxItems"] = 1
    if definitions:
        array["$defs"] = definitions
    return array


def _rebased(schema: dict[str, Any], base: str) -> dict[str, Any] | None:
    """A copy of the schema with its references into itself made to point below `base`; None when it has none."""
    copy: dict[str, Any] = json.loads(json.dumps(schema))
    nodes: list[Any] = [copy]
    rebased = False
    while nodes:  # iteratively: a deeply nested schema must not exhaust the stack
        node = nodes.pop()
        values = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        nodes.extend(value for value in values if isinstance(value, dict | list))
        if isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
            node["$ref"], rebased = base + node["$ref"][1:], True
    return copy if rebased else None
