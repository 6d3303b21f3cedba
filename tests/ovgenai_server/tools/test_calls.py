"""Tool calls read from model output in each format, whole and piece by piece (every split of the text gives the
same calls and text), and the grammar that forces a call."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from ovgenai_common.settings import ToolParserName
from ovgenai_server.tools import calls as tool_calls
from ovgenai_server.tools.calls import (
    TOOL_PARSERS,
    CallDelta,
    ForcedCalls,
    Text,
    ToolCallParser,
    detect_tool_format,
    forced_call_schema,
)


def test_every_parser_name_the_settings_take_is_read():
    assert set(TOOL_PARSERS) == set(get_args(ToolParserName))


def read(tool_format: str, pieces: list[str], parallel: bool = True) -> tuple[str, list[tuple[str, dict]]]:
    """(text, [(name, arguments)]) from the pieces as a stream would feed them."""
    parser = ToolCallParser(tool_format, parallel)  # type: ignore[arg-type]
    events = [event for piece in pieces for event in parser.feed(piece)] + parser.finish()
    text = "".join(event.text for event in events if isinstance(event, Text))
    calls = [(event.name, json.loads(event.arguments)) for event in events if isinstance(event, CallDelta)]
    assert [event.index for event in events if isinstance(event, CallDelta)] == list(range(len(calls)))
    return text, calls


def every_split(text: str) -> list[list[str]]:
    """The text whole, one character at a time, and cut in two at every point."""
    return [[text], list(text)] + [[text[:cut], text[cut:]] for cut in range(1, len(text))]


HERMES = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
          '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>\n')


@pytest.mark.parametrize("tool_format", ["hermes3", "auto"])
def test_hermes_blocks_in_any_split(tool_format):
    for pieces in every_split(HERMES):
        assert read(tool_format, pieces) == (
            "Let me check.", [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "UTC"})]
        ), pieces


def test_text_streams_before_the_block_closes():
    parser = ToolCallParser("hermes3")
    assert parser.feed("Let me check. <tool_") == [Text("Let me check.")]  # the tag's start is held back
    assert parser.feed('call>{"name": "f", "arguments": {}') == []
    [call] = parser.feed("}</tool_call>")
    assert (call.index, call.name, call.arguments) == (0, "f", "{}") and call.id.startswith("call_")


def test_a_block_that_is_not_a_call_stays_text():
    assert read("hermes3", ["<tool_call>{not json}</tool_call> ok"]) == ("<tool_call>{not json}</tool_call> ok", [])
    assert read("hermes3", ['<tool_call>{"no": "name"}</tool_call>']) == ('<tool_call>{"no": "name"}</tool_call>', [])


def test_an_unclosed_block_is_a_call_when_its_json_is_whole():
    assert read("hermes3", ['<tool_call>{"name": "f", "arguments": {"a": 1}}']) == ("", [("f", {"a": 1})])
    assert read("hermes3", ['<tool_call>{"name": "f", "argu']) == ('<tool_call>{"name": "f", "argu', [])


def test_plain_text_is_kept_exactly():
    for tool_format in ("hermes3", "llama3", "pythonic", "auto"):
        for pieces in every_split("  Paris is <b>sunny</b>.\n\n"):
            assert read(tool_format, pieces) == ("  Paris is <b>sunny</b>.\n\n", []), (tool_format, pieces)


LLAMA3 = ('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
          '{"name": "get_time", "parameters": {}}')


def test_llama3_json_calls():
    for pieces in every_split(LLAMA3):
        assert read("llama3", pieces) == ("", [("get_weather", {"city": "Paris"}), ("get_time", {})])
    assert read("auto", ['{"name": "f", "arguments": "{\\"a\\": 1}"}']) == ("", [("f", {"a": 1})])
    assert read("llama3", ['{"name": "f", "parameters": {}} and more']) == ('{"name": "f", "parameters": {}} and more',
                                                                          [])
    assert read("llama3", ['{"answer": 42}']) == ('{"answer": 42}', [])


def test_pythonic_calls_keep_each_call_apart():
    """openvino_genai's Llama3PythonicToolParser merges these into one call with both arguments."""
    for pieces in every_split('[get_weather(city="Paris", days=2), get_time(zone="UTC")]'):
        assert read("pythonic", pieces) == ("", [("get_weather", {"city": "Paris", "days": 2}),
                                                  ("get_time", {"zone": "UTC"})])


@pytest.mark.parametrize("text", ["[f(1)]", "[f(x=open('a'))]", "[f(x={1, 2})]", "[x]", "[]", "[f(x=1)] + 1",
                                  "[" * 500])
def test_pythonic_text_that_is_not_literal_calls_stays_text(text):
    assert read("pythonic", [text]) == (text, [])


def test_parallel_false_keeps_the_first_call():
    assert read("hermes3", [HERMES], parallel=False) == ("Let me check.", [("get_weather", {"city": "Paris"})])


def test_the_format_is_read_from_the_template():
    assert detect_tool_format("{{ '<tool_call>' }}{{ tools }}") == "hermes3"
    assert detect_tool_format('{{ "<|python_tag|>" }}{{ tools }}') == "llama3"
    assert detect_tool_format("{{ tools }}") == "auto"


def test_a_named_function_streams_its_arguments():
    forced = ForcedCalls("get_weather")
    first, second = forced.feed('{"city": '), forced.feed('"Paris"}')
    assert first[0].name == "get_weather" and first[0].id and second == [CallDelta(0, '"Paris"}')]
    assert forced.finish() == []


def test_required_sends_each_call_once_complete():
    forced = ForcedCalls(None)
    assert forced.feed('[{"name": "a", "parameters": {"x": ') == []
    [first] = forced.feed('1}}, {"name": "b", ')
    assert (first.name, first.arguments) == ("a", '{"x": 1}')
    [second] = forced.feed('"parameters": {}}]')
    assert (second.index, second.name) == (1, "b") and forced.finish() == []


REQUIRED = ('[{"name": "a", "parameters": {"rows": [' + ", ".join(['{"x": "}]{\\" [", "y": {}}'] * 50) + ']}},\n'
            ' {"name": "b", "parameters": {}}]')


def test_required_in_any_split():
    for pieces in [[REQUIRED], list(REQUIRED), *([REQUIRED[:cut], REQUIRED[cut:]] for cut in range(len(REQUIRED)))]:
        forced = ForcedCalls(None)
        events = [event for piece in pieces for event in forced.feed(piece)] + forced.finish()
        assert [(e.index, e.name, json.loads(e.arguments)) for e in events if isinstance(e, CallDelta)] == [
            (0, "a", json.loads(REQUIRED)[0]["parameters"]), (1, "b", {})], pieces
        assert len(events) == 2


class CountingJSON:
    """The json module, counting the characters each decoding call is given to read."""

    def __init__(self):
        self.read = 0
        self.dumps = json.dumps
        counter = self

        class Decoder(json.JSONDecoder):
            def raw_decode(self, s, idx=0):
                counter.read += len(s) - idx
                return super().raw_decode(s, idx)

        self.JSONDecoder = Decoder

    def loads(self, text, **kwargs):
        self.read += len(text)
        return json.loads(text, **kwargs)


def test_required_reads_its_output_once(monkeypatch):
    """Each call is decoded once, when it is complete: re-reading the array at every piece would cost the square of
    a long forced output on the event loop."""
    counting = CountingJSON()
    monkeypatch.setattr(tool_calls, "json", counting)
    forced = ForcedCalls(None)
    calls = [event for piece in REQUIRED for event in forced.feed(piece)] + forced.finish()
    assert len(calls) == 2 and counting.read <= len(REQUIRED)


def test_required_cut_short_gives_its_text():
    forced = ForcedCalls(None)
    assert forced.feed('[{"name": "a", "param') == [] and forced.finish() == [Text('[{"name": "a", "param')]


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time"}}]


def test_the_forcing_schemas():
    assert forced_call_schema(TOOLS, "get_weather", True) == TOOLS[0]["function"]["parameters"]
    schema = forced_call_schema(TOOLS, None, parallel=False)
    assert schema["minItems"] == 1 and schema["maxItems"] == 1
    names = [option["properties"]["name"]["enum"] for option in schema["items"]["anyOf"]]
    assert names == [["get_weather"], ["get_time"]]
    # get_time declares no parameters: it takes none (it was "any object")
    assert schema["items"]["anyOf"][1]["properties"]["parameters"] == {
        "type": "object", "properties": {}, "additionalProperties": False}
    assert "maxItems" not in forced_call_schema(TOOLS, None, parallel=True)


def _resolve(schema: dict, ref: str) -> dict:
    node = schema
    for key in filter(None, ref.removeprefix("#").split("/")):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def test_required_keeps_each_tools_references_pointing_at_its_own_definitions():
    tools = [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"place": {"$ref": "#/$defs/Place"}, "again": {"$ref": "#"},
                                         "other": {"$ref": "https://example.com/place.json"}},
        "$defs": {"Place": {"const": name}}}}} for name in ("a", "b")]
    original = json.dumps(tools)
    schema = forced_call_schema(tools, None, True)
    for index, option in enumerate(schema["items"]["anyOf"]):
        parameters = _resolve(schema, option["properties"]["parameters"]["$ref"])
        properties = parameters["properties"]
        assert _resolve(schema, properties["place"]["$ref"]) == {"const": "ab"[index]}
        assert _resolve(schema, properties["again"]["$ref"]) is parameters
        assert properties["other"]["$ref"] == "https://example.com/place.json"  # not a reference inside the schema
    assert json.dumps(tools) == original  # the request's tools are not changed
