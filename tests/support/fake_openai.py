"""An independent OpenAI-compatible server for tests (`python -m tests.support.fake_openai PORT [KEY]`).

It is deliberately not built on our shared core: it stands for "any OpenAI-compatible server" (vLLM, OVMS, a
hosted API). Models: `echo` answers with the last user message; `cut` streams two chunks then drops the
connection; `slow` waits 5 s before answering; `trickle` streams a word every 0.1 s for a minute; `markdown`
streams MARKDOWN (what the chat page must render, and must not run) in pieces; `links` streams LINKS, a long answer
full of addresses, in pieces that cut them.
"""

from __future__ import annotations

import asyncio
import json
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

KEY = sys.argv[2] if len(sys.argv) > 2 else None
MARKDOWN = """## Steps

1. Install **OpenVINO**
2. Run `make run`

<img src=x onerror="window.injected = 1"> and [click me](javascript:window.injected=2) and
[the docs](https://example.com/docs) and *done*.

```python
print("<b>not bold</b>")
```
"""

# Addresses as answers quote them: bare, as a link's label, in bold inside a label, in <> and (), a mailto link, an
# unsafe link labelled with an address, then a list of LINK_ITEMS items with two addresses each.
LINK_ITEMS = 150
LINKS = """Sources: https://docs.openvino.ai/2025/index.html and
[https://github.com/openvinotoolkit/openvino.genai](https://github.com/openvinotoolkit/openvino.genai).

See [**https://example.com/bold**](https://example.com/bold), <https://example.com/angle>, (https://example.com/paren),
[us](mailto:team@example.com) and [https://evil.example](javascript:alert).

""" + "".join(f"- Page {i}: https://example.com/page/{i}?q=a_b&r=*c* and "
              f"[https://example.org/{i}](https://example.org/{i})\n" for i in range(LINK_ITEMS))


def unauthorized(request: Request) -> Response | None:
    if KEY and request.headers.get("authorization") != f"Bearer {KEY}":
        return JSONResponse({"error": {"message": "bad key", "type": "authentication_error", "param": None,
                                       "code": "invalid_api_key"}}, status_code=401)
    return None


async def models(request: Request) -> Response:
    return unauthorized(request) or JSONResponse({"object": "list", "data": [{"id": "echo", "object": "model"}]})


async def chat(request: Request) -> Response:
    if (denied := unauthorized(request)) is not None:
        return denied
    body = await request.json()
    text = body["messages"][-1]["content"]
    model = body.get("model")
    if model == "slow":
        await asyncio.sleep(5)
    if not body.get("stream"):
        return JSONResponse({"id": "x", "object": "chat.completion", "model": model, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    if model == "trickle":
        words = [f"word{i} " for i in range(600)]
    elif model == "markdown":
        words = [MARKDOWN[i:i + 12] for i in range(0, len(MARKDOWN), 12)]
    elif model == "links":
        words = [LINKS[i:i + 7] for i in range(0, len(LINKS), 7)]
    else:
        words = text.split()

    async def events():
        for word in words:
            if model == "trickle":
                await asyncio.sleep(0.1)
            chunk = {"id": "x", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            if model == "cut":
                raise RuntimeError("connection dropped on purpose")
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


app = Starlette(routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
