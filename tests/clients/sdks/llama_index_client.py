"""LlamaIndex's OpenAILike against the backend: completion, chat and a streamed chat."""

from __future__ import annotations

import os

from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike

BASE, MODEL = os.environ["CLIENT_SUITE_BASE_URL"], os.environ["CLIENT_SUITE_MODEL"]


def llm(chat: bool) -> OpenAILike:
    return OpenAILike(model=MODEL, api_base=BASE, api_key="unused", is_chat_model=chat, max_tokens=8,
                      temperature=0, max_retries=0)


def test_a_completion():
    assert llm(chat=False).complete("The capital of France is").text.strip()


def test_a_chat_and_a_streamed_chat():
    messages = [ChatMessage(role="user", content="Name a colour.")]
    assert llm(chat=True).chat(messages).message.content.strip()
    pieces = [chunk.delta for chunk in llm(chat=True).stream_chat(messages)]
    assert len(pieces) > 1 and "".join(pieces).strip()
