"""Retrieval-augmented answering: embed the question, retrieve top-k chunks, prompt, stream the LLM's answer.

The LLM is LangChain's ChatOpenAI against the LLM microservice; its chunks are re-emitted as proper OpenAI
chat.completion.chunk events (not OPEA's `data: b'...'` lines), with the sources in the final chunk.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.sse import DONE_FRAME, error_frame, frame

from .settings import GatewaySettings
from .store import DocumentStore

logger = logging.getLogger(__name__)
NO_DOCUMENTS = "No documents are ingested; the answer comes from the model alone."
CONDENSE_PROMPT = (
    "Given the conversation below, rewrite the last user question as a standalone question. "
    "Reply with the question only.\n\n{history}\n\nLast question: {question}"
)


@dataclass
class Question:
    messages: list[dict[str, str]]  # OpenAI-style, the last one is the user's question
    max_tokens: int
    temperature: float
    top_k: int


def upstream_error(error: Exception, service: str) -> APIError:
    if isinstance(error, APIError):
        return error
    if isinstance(error, openai.APIStatusError) and 400 <= error.status_code < 500 and error.status_code != 429:
        return APIError(ErrorKind.INVALID_REQUEST, f"The {service} refused the request: {error.message}")
    if isinstance(error, openai.APITimeoutError | httpx.TimeoutException):
        return APIError(ErrorKind.TIMEOUT, f"The {service} timed out.")
    return APIError(ErrorKind.UNAVAILABLE, f"The {service} is unavailable ({type(error).__name__}).")


class RAGPipeline:
    def __init__(self, settings: GatewaySettings, store: DocumentStore, llm, metrics):
        self.settings = settings
        self.store = store
        self.llm = llm
        self.metrics = metrics

    async def _condense(self, messages: list[dict[str, str]]) -> str:
        question = messages[-1]["content"]
        if self.settings.history != "condense" or len(messages) < 2:
            return question
        history = "\n".join(f"{m['role']}: {m['content']}" for m in messages[:-1])
        reply = await self.llm.ainvoke(
            [HumanMessage(CONDENSE_PROMPT.format(history=history, question=question))], max_tokens=64
        )
        return str(reply.content).strip() or question

    async def retrieve(self, question: str, k: int) -> list[dict[str, Any]]:
        started = time.perf_counter()
        try:
            vector = await self.store.embeddings.aembed_query(question)
        except Exception as error:
            raise upstream_error(error, "embedding service") from error
        embedded = time.perf_counter()
        hits = await self.store.search(vector, k)
        self.metrics.embed.observe(embedded - started)
        self.metrics.retrieve.observe(time.perf_counter() - embedded)
        return [
            {"document": doc.metadata.get("source"), "chunk": doc.metadata.get("chunk"),
             "score": round(float(score), 4), "text": doc.page_content}
            for doc, score in hits
        ]

    def prompt(self, messages: list[dict[str, str]], sources: list[dict[str, Any]]) -> list[BaseMessage]:
        context = "\n\n".join(f"[{s['document']}] {s['text']}" for s in sources) or "(no documents)"
        system = self.settings.prompt_template.replace("{context}", context)
        out: list[BaseMessage] = [SystemMessage(system)]
        earlier = messages[:-1] if self.settings.history == "pass" else []
        for message in earlier:
            if message["role"] == "user":
                out.append(HumanMessage(message["content"]))
            elif message["role"] == "assistant":
                out.append(AIMessage(message["content"]))
        out.append(HumanMessage(messages[-1]["content"]))
        return out

    async def _prepare(self, question: Question) -> tuple[list[BaseMessage], list[dict[str, Any]], dict[str, Any]]:
        try:
            query = await self._condense(question.messages)
        except Exception as error:
            raise upstream_error(error, "LLM service") from error
        empty = await self.store.count() == 0
        sources = [] if empty else await self.retrieve(query, question.top_k)
        info = {"sources": sources}
        if empty:
            info["retrieval"] = NO_DOCUMENTS
        return self.prompt(question.messages, sources), sources, info

    async def answer(self, question: Question, model: str) -> dict[str, Any]:
        started = time.perf_counter()
        prompt, _, info = await self._prepare(question)
        try:
            reply = await self.llm.ainvoke(prompt, max_tokens=question.max_tokens, temperature=question.temperature)
        except Exception as error:
            raise upstream_error(error, "LLM service") from error
        self.metrics.total.observe(time.perf_counter() - started)
        usage = reply.usage_metadata or {}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": str(reply.content)},
                         "finish_reason": reply.response_metadata.get("finish_reason", "stop")}],
            "usage": {"prompt_tokens": usage.get("input_tokens", 0),
                      "completion_tokens": usage.get("output_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0)},
            **info,
        }

    async def open_stream(self, question: Question, model: str) -> AsyncIterator[bytes]:
        """Retrieve and start the LLM before returning, so failures up to the first token are HTTP errors."""
        started = time.perf_counter()
        prompt, _, info = await self._prepare(question)
        chunks = self.llm.astream(prompt, max_tokens=question.max_tokens, temperature=question.temperature)
        try:
            first = await anext(chunks)
        except StopAsyncIteration:
            first = None
        except Exception as error:
            raise upstream_error(error, "LLM service") from error
        self.metrics.first_token.observe(time.perf_counter() - started)
        return self._relay(first, chunks, info, model, started)

    async def _relay(self, first, chunks, info: dict[str, Any], model: str, started: float) -> AsyncIterator[bytes]:
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            return frame({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

        # The role rides on the first text, as the backend sends it: a first chunk without text would read as
        # the first token to benchmark clients.
        role = {"role": "assistant"}
        finish = "stop"
        try:
            pending = [first] if first is not None else []
            while True:
                piece = pending.pop() if pending else await anext(chunks)
                finish = piece.response_metadata.get("finish_reason") or finish
                if piece.content:
                    yield chunk({**role, "content": str(piece.content)})
                    role = {}
        except StopAsyncIteration:
            pass
        except asyncio.CancelledError:
            await chunks.aclose()  # client went away: close the upstream stream too
            raise
        except Exception as error:
            logger.warning("LLM stream failed: %s", error)
            yield error_frame(upstream_error(error, "LLM service").message, ErrorKind.UNAVAILABLE)
            yield DONE_FRAME
            return
        if role:  # an answer without text still opens with the role
            yield chunk({**role, "content": ""})
        yield chunk({}, finish, **info)
        self.metrics.total.observe(time.perf_counter() - started)
        yield DONE_FRAME
