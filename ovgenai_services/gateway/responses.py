"""OpenAI's Responses API on the gateway: a request read as a chat question (its instructions, the conversation of
`previous_response_id`, its input: ovgenai_common.responses_protocol), answered from the retrieved documents, and
given back as a message item whose text cites the documents it was answered from (`file_citation` annotations; the
chunks themselves in `sources`, as the chat answers carry them), whole or as the Responses events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import ValidationError

from ovgenai_common.errors import ErrorKind, invalid
from ovgenai_common.response_output import ResponseEvents, event_frame, response_of
from ovgenai_common.response_store import ResponseStore
from ovgenai_common.responses_protocol import ResponsesRequest, chat_messages

from .protocol import OpenAIChatRequest
from .rag import Answering, Question, RAGPipeline, llm_failed


def chat_request(request: ResponsesRequest, earlier: list[dict[str, Any]]) -> OpenAIChatRequest:
    """The chat question that answers `request`; what a retrieval pipeline cannot answer is a 400 naming it."""
    request.refuse_unknown_fields()
    if request.tools:
        raise invalid("The RAG gateway answers from its documents and takes no tools; the backend's /v1/responses "
                      "takes function tools.", "tools")
    text_format = request.text.format if request.text is not None else None
    if text_format is not None and text_format.type != "text":
        raise invalid("The RAG gateway answers in text; the backend's /v1/responses takes JSON formats.",
                      "text.format")
    messages = [{"role": "system", "content": request.instructions}] if request.instructions else []
    messages += earlier + chat_messages(request.input)
    if any(m["role"] == "tool" or "tool_calls" in m or not isinstance(m["content"], str) for m in messages):
        raise invalid("The RAG gateway takes text messages only (no function calls, their outputs or images).",
                      "input")
    body: dict[str, Any] = {"messages": messages, "stream": request.stream}
    for name, value in (("max_tokens", request.max_output_tokens), ("temperature", request.temperature),
                        ("top_p", request.top_p)):
        if value is not None:
            body[name] = value
    try:
        return OpenAIChatRequest.model_validate(body)
    except ValidationError as error:
        first = error.errors()[0]
        param = "max_output_tokens" if first["loc"][0] == "max_tokens" else "input"
        raise invalid(f"The input is not a question this gateway can answer: {first['msg']}.", param) from error


def citations(sources: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Each document the answer was given from, once, cited at the answer's end."""
    documents = dict.fromkeys(str(source["document"]) for source in sources)
    return [{"type": "file_citation", "file_id": name, "filename": name, "index": len(text)} for name in documents]


class Responder:
    """One request's response: answered whole or streamed, then stored when `store` asks."""

    def __init__(self, rag: RAGPipeline, store: ResponseStore, client: str, request: ResponsesRequest,
                 question: Question, conversation: list[dict[str, Any]], model: str):
        self.rag, self.store, self.client, self.request, self.question = rag, store, client, request, question
        self.conversation = conversation  # the earlier turns and this input (no instructions)
        self.events = ResponseEvents(response_of(request, model))
        self.text = ""

    async def answer(self) -> dict[str, Any]:
        completion = await self.rag.answer(self.question, self.events.response["model"])
        choice = completion["choices"][0]
        self.events.feed({"content": choice["message"]["content"]})
        self.text = choice["message"]["content"]
        self._finish(completion["usage"], choice["finish_reason"], completion)
        return self.events.response

    async def stream(self) -> AsyncIterator[bytes]:
        """The events, the LLM started before returning (so failures up to its first token are HTTP errors)."""
        answering = await self.rag.open_answer(self.question)
        return self._events(answering)

    async def _events(self, answering: Answering) -> AsyncIterator[bytes]:
        for event in self.events.started():
            yield event_frame(event)
        try:
            async for piece in answering.pieces:
                self.text += piece
                for event in self.events.feed({"content": piece}):
                    yield event_frame(event)
        except Exception as error:  # after the headers: the stream says it, as a failed response
            for event in self.events.fail(llm_failed(error).message, ErrorKind.UNAVAILABLE):
                yield event_frame(event)
            return
        for event in self._finish(answering.ending.usage, answering.ending.finish, answering.closing()):
            yield event_frame(event)

    def _finish(self, usage: dict[str, int], finish: str, info: dict[str, Any]) -> list[dict[str, Any]]:
        events = self.events.finish(usage, finish, citations(info["sources"], self.text))
        response = self.events.response
        response.update({name: info[name] for name in ("sources", "retrieval", "timings") if name in info})
        if self.request.store:
            self.store.put(self.client, response,
                           [*self.conversation, {"role": "assistant", "content": self.text}])
        return events
