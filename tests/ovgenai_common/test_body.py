"""Bodies within bounds before a route parses them: JSON nested too deep is a 400 in OpenAI's shape, JSON bodies
have a smaller size limit than uploads, and the body a route reads is the one the client sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from hypothesis import given, settings
from hypothesis import strategies as st

from ovgenai_common.app import create_service_app
from ovgenai_common.body import MAX_JSON_DEPTH, Pace, loads, not_json, paced, too_deep
from ovgenai_common.errors import APIError
from ovgenai_common.settings import ServiceSettings


def nested(depth: int, inner: bytes = b"1") -> bytes:
    return b'{"a":' * (depth // 2) + b"[" * (depth - depth // 2) + inner + b"]" * (depth - depth // 2) + \
        b"}" * (depth // 2)


@pytest.mark.parametrize(("text", "depth", "deep"), [
    (nested(128), 128, False),
    (nested(129), 128, True),
    (b"[" * 100_000 + b"]" * 100_000, 128, True),
    (b"[" * 100_000, 128, True),  # never closed: the parser would recurse just the same
    (b"[" * 10, 128, False),  # never closed but shallow: malformed, which the parser says
    (b"[1]]" + nested(200), 128, False),  # the parser stops at the stray bracket, before the deep part
    (json.dumps({"text": "[" * 1000 + "{" * 1000}).encode(), 2, False),  # brackets in strings do not nest
    (json.dumps({"text": 'a "quoted" \\ [[[[', "x": [[[]]]}).encode(), 3, True),  # escapes end no string
    (json.dumps({"text": 'a "quoted" \\ [[[[', "x": [[[]]]}).encode(), 4, False),
    (json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}).encode(), 5, False),
])
def test_depth(text, depth, deep):
    assert too_deep(text, depth) is deep


JSON_VALUES = st.recursive(
    st.text(alphabet='ab[]{}"\\:, \u00e9', max_size=8) | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='k[]{}"\\', max_size=4), inner,
                                                                max_size=3),
    max_leaves=20,
)


def real_depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(real_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(real_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_depth_is_the_parsed_values_whatever_its_strings_hold(value, compact):
    """Brackets, quotes and backslashes inside strings never count, however they are escaped."""
    text = json.dumps(value, ensure_ascii=not compact, separators=(",", ":") if compact else None).encode()
    depth = real_depth(value)
    assert not too_deep(text, depth) and (depth == 0 or too_deep(text, depth - 1))


def app_with(upload_paths: set[str] | None = None, **values) -> FastAPI:
    app = create_service_app(ServiceSettings(**values), title="t", upload_paths=upload_paths)

    @app.post("/v1/echo")
    async def echo(request: Request) -> dict:
        return {"received": len(await request.body()), "json": await request.json()}

    @app.post("/v1/upload")
    async def upload(request: Request) -> dict:
        return {"received": len(await request.body())}

    return app


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "application/vnd.api+json", None])
async def test_json_nested_too_deep_is_a_400(content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    async with client(app_with()) as http:
        deep = await http.post("/v1/echo", content=b"[" * 50_000 + b"]" * 50_000, headers=headers)
        assert deep.status_code == 400
        assert deep.json()["error"] == {"message": f"JSON nested more than {MAX_JSON_DEPTH} levels deep.",
                                        "type": "invalid_request_error", "param": None, "code": "json_too_deep"}
        fine = await http.post("/v1/echo", content=nested(MAX_JSON_DEPTH), headers=headers)
        assert fine.status_code == 200 and fine.json()["received"] == len(nested(MAX_JSON_DEPTH))


async def test_the_depth_limit_is_a_setting():
    async with client(app_with(max_json_depth=3)) as http:
        assert (await http.post("/v1/echo", json={"a": {"b": [1]}})).status_code == 200
        assert (await http.post("/v1/echo", json={"a": {"b": [[1]]}})).status_code == 400


async def test_json_bodies_have_their_own_size_limit_and_uploads_the_general_one():
    app = app_with(max_request_bytes=64 * 1024, max_json_bytes=8 * 1024)
    async with client(app) as http:
        big = json.dumps({"text": "x" * 10_000})
        refused = await http.post("/v1/echo", content=big, headers={"Content-Type": "application/json"})
        assert refused.status_code == 413 and "8192 bytes" in refused.json()["error"]["message"]

        async def chunks():  # no Content-Length: counted as it arrives
            for _ in range(10):
                yield b" " * 1024
            yield b"{}"

        streamed = await http.post("/v1/echo", content=chunks(), headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413
        upload = await http.post("/v1/upload", files={"file": ("a.bin", b"x" * 30_000)})
        assert upload.status_code == 200 and upload.json()["received"] > 30_000
        too_big = await http.post("/v1/upload", files={"file": ("a.bin", b"x" * 70_000)})
        assert too_big.status_code == 413


def pulled(app: FastAPI) -> tuple[Any, list[int]]:
    """`app` as the server calls it, and the size of each part of a body it pulled from the client."""
    sizes: list[int] = []

    async def counting(scope, receive, send) -> None:
        async def counted() -> dict:
            message = await receive()
            sizes.append(len(message.get("body", b"")))
            return message

        await app(scope, counted, send)

    return counting, sizes


@pytest.mark.parametrize("headers", [
    [("content-type", "text/plain")],
    [("content-type", "application/x-www-form-urlencoded")],
    [("content-type", "multipart/form-data; boundary=b")],
    [("content-type", "application/json, text/plain")],  # one header with two types: read as text/plain
    [("content-type", "text/plain; application/json")],
    [("content-type", "nonsense")],
    [],
    [("content-type", "application/json"), ("content-type", "text/plain")],
], ids=["text", "form", "multipart", "two-in-one", "json-as-parameter", "nonsense", "none", "two-headers"])
@pytest.mark.parametrize("length", ["declared", "chunked"])
async def test_a_route_without_uploads_holds_any_body_to_the_json_limit(headers, length):
    """The limit came from the Content-Type: on the gateway, whose general limit (64 MiB) is for its uploads, a 5 MB
    JSON body sent as text/plain, as a form or with an odd type was read whole before the chat route's 400."""
    app, sizes = pulled(app_with({"/v1/upload"}, max_request_bytes=64 * 1024, max_json_bytes=8 * 1024))
    big = json.dumps({"messages": "x" * 20_000}).encode()

    async def chunks():  # no Content-Length: counted as it arrives
        for start in range(0, len(big), 1024):
            yield big[start:start + 1024]

    async with client(app) as http:
        reply = await http.post("/v1/echo", content=big if length == "declared" else chunks(), headers=headers)
    if len(headers) > 1:
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "content_type_repeated"
    else:
        assert reply.status_code == 413 and "8192 bytes" in reply.json()["error"]["message"], reply.text
    assert sum(sizes) <= 8 * 1024 + 1024  # at most the part that passed the limit, never the rest


async def test_the_upload_routes_alone_take_bodies_past_the_json_limit():
    app = app_with({"/v1/upload"}, max_request_bytes=64 * 1024, max_json_bytes=8 * 1024)
    async with client(app) as http:
        upload = await http.post("/v1/upload", content=b"x" * 30_000, headers={"Content-Type": "text/plain"})
        assert upload.status_code == 200 and upload.json()["received"] == 30_000
        too_big = await http.post("/v1/upload", content=b"x" * 70_000, headers={"Content-Type": "text/plain"})
        assert too_big.status_code == 413 and "65536 bytes" in too_big.json()["error"]["message"]
        json_upload = await http.post("/v1/upload", json={"text": "x" * 10_000})  # JSON: the JSON limit anywhere
        assert json_upload.status_code == 413
        small = await http.post("/v1/echo", content=b'{"a": [1]}', headers={"Content-Type": "text/plain"})
        assert small.status_code == 200 and small.json() == {"received": 10, "json": {"a": [1]}}


async def test_the_route_reads_the_body_the_client_sent():
    body = {"messages": [{"role": "user", "content": "héllo " * 1000}], "n": [1, [2, [3]]]}
    async with client(app_with()) as http:
        echoed = await http.post("/v1/echo", json=body)
    assert echoed.status_code == 200 and echoed.json()["json"] == body


def test_loads_refuses_deep_and_malformed_json_with_a_400():
    with pytest.raises(APIError) as deep:
        loads(b"[" * 5000 + b"]" * 5000, 128, "link_list")
    assert deep.value.status == 400 and deep.value.param == "link_list" and deep.value.code == "json_too_deep"
    with pytest.raises(APIError) as malformed:
        loads("{'a': 1}", 128)
    assert malformed.value.status == 400 and malformed.value.message.startswith("Malformed JSON body")
    assert loads('{"a": [1]}', 128) == {"a": [1]}


def test_an_integer_past_pythons_digit_limit_is_said_in_json_terms():
    """Python's message told the client to call sys.set_int_max_str_digits()."""
    with pytest.raises(APIError) as error:
        loads(b'{"max_tokens": 1' + b"0" * 5000 + b"}", 128)
    assert error.value.status == 400 and "digits" in error.value.message and "sys." not in error.value.message


@pytest.mark.parametrize("text", [b'{"prompt": "hi \\ud800"}', b'{"prompt": "\\udc00\\ud800"}', b'{"t": NaN}',
                                  b'{"t": -Infinity}', b'{"t": 1e999}'])
async def test_what_python_parses_but_json_does_not_have_is_a_400(text):
    """An unpaired surrogate escape makes a str that cannot be encoded as UTF-8 (every later encode() failed: a
    500); NaN, Infinity and inf are not JSON either."""
    assert json.loads(text) is not None  # what FastAPI's parser would have handed the route
    async with client(app_with()) as http:
        refused = await http.post("/v1/echo", content=text, headers={"Content-Type": "application/json"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and "unpaired surrogate" in error["message"]
    with pytest.raises(APIError) as field:
        loads(text, 128, "chat_template_kwargs")
    assert field.value.status == 400 and field.value.param == "chat_template_kwargs"


async def test_json_with_paired_surrogates_and_escaped_controls_is_taken():
    text = b'{"prompt": "\\ud83d\\ude00 \\u0000 caf\\u00e9", "n": 18446744073709551616}'
    async with client(app_with()) as http:
        echoed = await http.post("/v1/echo", content=text, headers={"Content-Type": "application/json"})
    assert echoed.status_code == 200 and echoed.json()["json"] == json.loads(text)


async def trickled(first: bytes):
    """A body that sends its first part and never the rest."""
    yield first
    await asyncio.Event().wait()


@pytest.mark.parametrize(("path", "content_type"), [("/v1/echo", "application/json"),
                                                    ("/v1/upload", "application/octet-stream")])
async def test_a_body_that_does_not_arrive_in_time_is_a_408(path, content_type):
    """uvicorn waits for a body as long as the client likes: a trickled body held its connection for ever."""
    async with client(app_with(body_timeout=0.2)) as http:
        slow = await http.post(path, content=trickled(b'{"prompt": "'), headers={"Content-Type": content_type})
    assert slow.status_code == 408
    assert slow.json()["error"]["message"] == "The request body did not arrive within 0.2 s."


def test_text_that_is_not_utf8_is_refused_and_malformed_utf8_left_to_the_route_s_parser():
    """Python's parser reads UTF-16 and UTF-32 too (a lone surrogate then passed as \\ud800 in UTF-16): JSON is
    UTF-8 only. A malformed UTF-8 text is the route's parser's to describe."""
    for text in (b'{"input": "\xff\xfe"}', '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-16-le"),
                 b"\xef\xbb\xbf{}", b'"\xed\xa0\x80"'):
        assert not_json(text).code == "json_not_utf8", text
        with pytest.raises(APIError) as refused:
            loads(text, 128, "link_list")
        assert refused.value.code == "json_not_utf8" and refused.value.param == "link_list"
    assert not_json(b"{bad") is None


def test_loads_names_where_the_surrogate_or_nan_is():
    with pytest.raises(APIError) as body:
        loads(b'{"messages": [{"role": "user", "content": "\\ud800"}]}', 128)
    assert body.value.param == "messages.0.content" and "'messages.0.content'" in body.value.message
    with pytest.raises(APIError) as field:
        loads('{"properties": {"a": {"default": NaN}}}', 128, "response_format.json_schema.schema")
    assert field.value.param == "response_format.json_schema.schema"
    assert "at 'properties.a.default'" in field.value.message and "NaN" in field.value.message
    with pytest.raises(APIError) as key:
        loads(b'{"ok": 1, "k\\udc00": 2}', 128)
    assert key.value.param == "k\\udc00" and key.value.code == "invalid_json"
    json.dumps(key.value.body(), ensure_ascii=False).encode("utf-8")  # the error itself is sendable


def parts(*chunks: tuple[float, bytes]):
    """A receive that gives each chunk after its delay, the last one ending the body; then the client's disconnect
    when asked again."""
    queue = list(chunks)

    async def receive() -> dict:
        if not queue:
            await asyncio.Event().wait()
        delay, body = queue.pop(0)
        await asyncio.sleep(delay)
        return {"type": "http.request", "body": body, "more_body": bool(queue)}

    return receive


async def read_all(receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message["body"]
        if not message["more_body"]:
            return body


@pytest.mark.looptime
async def test_a_paced_body_arrives_within_the_grace_then_at_the_rate():
    """Slow at first, then fast enough: its n-th byte came within grace + n / min_rate. The pace tests run on the
    event loop's virtual clock (looptime): each delay takes exactly its time, however busy the machine."""
    pace = Pace(min_rate=100, grace=0.6)  # due: a by 0.61 s, c by 0.82 s
    body = await read_all(paced(parts((0.2, b"a"), (0.0, b"b" * 20), (0.2, b"c")), pace))
    assert body == b"a" + b"b" * 20 + b"c"


@pytest.mark.parametrize("chunks", [
    [(0.0, b"a"), (0.5, b"b")],  # stalls within the grace: due by 0.2 + 2 / 100 s
    [(0.0, b"a"), (0.15, b"b"), (0.15, b"c")],  # no wait as long as the grace, but the whole takes too long
])
@pytest.mark.looptime
async def test_a_paced_body_below_the_rate_is_a_408_that_says_so(chunks):
    with pytest.raises(APIError) as slow:
        await read_all(paced(parts(*chunks), Pace(min_rate=100, grace=0.2)))
    assert slow.value.status == 408 and slow.value.code == "upload_too_slow"
    assert "100 bytes/s" in slow.value.message and "first 0.2 s" in slow.value.message
