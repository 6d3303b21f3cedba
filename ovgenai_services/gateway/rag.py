"""Retrieval-augmented answering: embed the question, retrieve k chunks, rerank them (keeping top_n) when a
reranker is configured, prompt, and answer with the LLM (LangChain's ChatOpenAI against the LLM microservice).

Each stage is timed (metrics.py): the histograms on /metrics, and the `timings` the answer carries.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from opentelemetry import trace

from ovgenai_common.errors import APIError
from ovgenai_common.opea import fill_template
from ovgenai_common.settings import MAX_JSON_BYTES
from ovgenai_common.tracing import span, start_span
from ovgenai_common.upstream import upstream_error

from .metrics import RAGMetrics, Timings
from .rerank import Reranker
from .store import DocumentStore, Search
from .streams import Ending, StreamFormat, frames, texts

NO_DOCUMENTS = "No documents are ingested; the answer comes from the model alone."
CONDENSE_PROMPT = (
    "Given the conversation below, rewrite the last user question as a standalone question. "
    "Reply with the question only.\n\n{history}\n\nLast question: {question}"
)


@dataclass
class Question:
    messages: list[dict[str, str]]  # OpenAI-style, the last one is the user's question
    k: int
    top_n: int
    llm: dict[str, Any]  # max_tokens, temperature, and whatever sampling the client set
    search: Search = field(default_factory=Search)
    chat_template: str | None = None
    instructions: str = ""  # the client's system and developer messages, ahead of the gateway's own


def llm_kwargs(llm: dict[str, Any]) -> dict[str, Any]:
    """LangChain's call arguments: OpenAI's own fields as they are, the others (top_k, repetition_penalty) in the
    body's extras, which the OpenAI client would otherwise refuse."""
    extra = {name: llm[name] for name in ("top_k", "repetition_penalty") if name in llm}
    kwargs = {name: value for name, value in llm.items() if name not in extra}
    return {**kwargs, "extra_body": extra} if extra else kwargs


@dataclass(frozen=True)
class Prompting:
    """PROMPT_TEMPLATE (the system prompt; {context} receives the chunks), HISTORY (what earlier turns do) and the
    longest prompt a request's chat_template may fill (the JSON body limit)."""

    template: str
    history: Literal["pass", "condense"] = "pass"
    max_chars: int = MAX_JSON_BYTES


class RAGPipeline:
    def __init__(self, store: DocumentStore, llm, metrics: RAGMetrics, prompting: Prompting,
                 reranker: Reranker | None = None):
        self.prompting = prompting
        self.store = store
        self.llm = llm
        self.metrics = metrics
        self.reranker = reranker

    def on(self, store: DocumentStore) -> RAGPipeline:
        """This pipeline answering from another index's store."""
        if store is self.store:
            return self
        return RAGPipeline(store, self.llm, self.metrics, self.prompting, self.reranker)

    async def _condense(self, messages: list[dict[str, str]]) -> str:
        question = messages[-1]["content"]
        if self.prompting.history != "condense" or len(messages) < 2:
            return question
        history = "\n".join(f"{m['role']}: {m['content']}" for m in messages[:-1])
        reply = await self.llm.ainvoke(
            [HumanMessage(CONDENSE_PROMPT.format(history=history, question=question))], max_tokens=64
        )
        return str(reply.content).strip() or question

    async def retrieve(self, question: str, k: int, top_n: int, search: Search | None = None,
                       timings: Timings | None = None) -> list[dict[str, Any]]:
        """The chunks a question is answered from: the k nearest, then (with a reranker) the top_n best of them."""
        timings = timings or Timings(self.metrics)
        with timings.stage("embed"):
            try:
                vector = await self.store.embed_query(question)
            except Exception as error:
                raise upstream_error("embedding service", error) from error
        with timings.stage("retrieve"):
            hits = await self.store.search(vector, k, search)
        sources = [
            {"document": doc.metadata.get("source"), "chunk": doc.metadata.get("chunk"),
             "score": round(float(score), 4), "text": doc.page_content}
            for doc, score in hits
        ]
        if self.reranker is None or not sources:
            return sources
        with timings.stage("rerank"):
            ranked = await self.reranker.rank(question, [s["text"] for s in sources])
        return [{**sources[index], "rerank_score": round(score, 4)} for index, score in ranked[:top_n]]

    def prompt(self, messages: list[dict[str, str]], sources: list[dict[str, Any]],
               chat_template: str | None = None, instructions: str = "") -> list[BaseMessage]:
        """The LLM's messages: one system message (the client's instructions, as OPEA's ChatQnA takes a system
        message, then the gateway's own with the retrieved context), the history, the question."""
        context = "\n\n".join(f"[{s['document']}] {s['text']}" for s in sources) or "(no documents)"
        earlier = messages[:-1] if self.prompting.history == "pass" else []
        system = [instructions] if instructions else []
        if chat_template is None:
            system.append(self.prompting.template.replace("{context}", context))
        out: list[BaseMessage] = [SystemMessage("\n\n".join(system))] if system else []
        for message in earlier:
            if message["role"] == "user":
                out.append(HumanMessage(message["content"]))
            elif message["role"] == "assistant":
                out.append(AIMessage(message["content"]))
        question = messages[-1]["content"]
        if chat_template is not None:
            # OPEA's chat_template is the whole prompt: {question} and (for RAG) {context} filled in.
            question = fill_template(chat_template, question, context, max_chars=self.prompting.max_chars)
        out.append(HumanMessage(question))
        return out

    async def _prepare(self, question: Question, timings: Timings) -> tuple[list[BaseMessage], dict[str, Any]]:
        try:
            query = await self._condense(question.messages)
        except Exception as error:
            raise llm_failed(error) from error
        empty = await self.store.count() == 0
        sources = [] if empty else await self.retrieve(query, question.k, question.top_n, question.search, timings)
        info: dict[str, Any] = {"sources": sources}
        if empty:
            info["retrieval"] = NO_DOCUMENTS
        return self.prompt(question.messages, sources, question.chat_template, question.instructions), info

    async def answer(self, question: Question, model: str) -> dict[str, Any]:
        timings = Timings(self.metrics)
        prompt, info = await self._prepare(question, timings)
        try:
            with span("rag.generate"):
                reply = await self.llm.ainvoke(prompt, **llm_kwargs(question.llm))
        except Exception as error:
            raise llm_failed(error) from error
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
            "timings": timings.finish(),
        }

    async def open_answer(self, question: Question) -> Answering:
        """Retrieve and start the LLM before returning, so failures up to the first token are HTTP errors."""
        timings = Timings(self.metrics)
        prompt, info = await self._prepare(question, timings)
        llm_started = time.perf_counter()
        generate = start_span("rag.generate")  # from the prompt sent to the answer's end
        chunks = self.llm.astream(prompt, **llm_kwargs(question.llm))
        try:
            with trace.use_span(generate):  # the LLM call (made at the first read) carries this span's context
                first = await anext(chunks)
        except StopAsyncIteration:
            first = None
        except Exception as error:
            generate.end()
            raise llm_failed(error) from error
        timings.first_token(llm_started)
        ending = Ending()
        pieces = texts(first, chunks, ending)
        # Untraced: no extra step per piece.
        return Answering(_ending(generate, pieces) if generate.is_recording() else pieces, ending, info, timings)

    async def open_stream(self, question: Question, model: str, fmt: StreamFormat = "openai",
                          include_usage: bool = False) -> AsyncIterator[bytes]:
        """The answer as chat completion chunks (or OPEA's lines), started before returning (open_answer)."""
        answering = await self.open_answer(question)
        return frames(answering.pieces, answering.ending, fmt, model, closing=answering.closing, failed=llm_failed,
                      include_usage=include_usage)


def llm_failed(error: Exception) -> APIError:
    return upstream_error("LLM service", error)


@dataclass
class Answering:
    """An answer streaming from the LLM: its text as it comes, how it ended, and what its end carries besides."""

    pieces: AsyncIterator[str]
    ending: Ending
    info: dict[str, Any]  # the sources (and, without documents, why there are none)
    timings: Timings

    def closing(self) -> dict[str, Any]:
        """What the answer's last event carries: the sources and each stage's time (once the text has ended)."""
        return {**self.info, "timings": self.timings.finish()}


async def _ending(generate: trace.Span, pieces: AsyncIterator[str]) -> AsyncIterator[str]:
    """The answer's text, with the generate span ended when it ends (finished, failed or abandoned by the client)."""
    try:
        async for piece in pieces:
            yield piece
    finally:
        generate.end()
