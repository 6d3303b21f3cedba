"""Stand-in backend replicas on loopback for the LLM microservice's system tests: each counts the requests it reads
and answers them as it is told, including the failures a real backend shows only by chance (an engine that dies on
a request resets its connection after reading the body)."""

from __future__ import annotations

import socket
import struct

from tests.support.loopback_http import LoopbackHTTP, QuietHandler

CHAT = {"id": "x", "object": "chat.completion", "model": "m", "usage": {"prompt_tokens": 1, "completion_tokens": 1,
        "total_tokens": 2}, "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                         "finish_reason": "stop"}]}


class StandInBackend(LoopbackHTTP):
    """`answer`: "reset" (read the body, then reset the connection), "ok", or an HTTP status to refuse with."""

    def __init__(self, answer: str | int = "reset") -> None:
        self.answer = answer
        self.requests = 0  # requests whose bodies it read
        stand_in = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - the http.server API
                self.reply(200 if self.path in ("/health", "/v1/models") else 404, {"status": "ok"})

            def do_POST(self):  # noqa: N802 - the http.server API
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stand_in.requests += 1
                if stand_in.answer == "reset":
                    # SO_LINGER 0: close sends RST, as a process that dies with the connection open does.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                elif stand_in.answer == "ok":
                    self.reply(200, CHAT)
                else:
                    self.reply(int(stand_in.answer), {"error": {"message": "refused on purpose", "type": "x",
                                                                "param": None, "code": None}})

        super().__init__(Handler)
