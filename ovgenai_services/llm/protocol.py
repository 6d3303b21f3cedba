"""Only what differs from OpenAI: OPEA lets `messages` be a plain string, `stream` defaults to true (and may be
spelt `streaming`, as OPEA's earlier guides do), and OPEA's `query` form (LLMParamsDoc) asks for a completion.

The body is otherwise relayed untouched, so every parameter the backend supports passes through (and the
backend, not this wrapper, names the ones it refuses).
"""

from __future__ import annotations

from typing import Any

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.opea import fill_template
from ovgenai_common.settings import MAX_JSON_BYTES

# OPEA's `query` form: the fields its own service passes on to the completion it asks for. `typical_p`, `language`
# and the guardrail parameters are dropped, as OPEA's own service drops them (its guide's curl sends typical_p).
QUERY_FIELDS = ("model", "max_tokens", "temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty",
                "repetition_penalty", "seed", "stop", "stream")
QUERY_DROPPED = ("typical_p", "language", "input_guardrail_params", "output_guardrail_params")
RAG_TEMPLATE = (
    "You are a helpful assistant. Answer the question using the search results below; if they do not contain the "
    "answer, say that you do not know.\n\nSearch results:\n{context}\n\nQuestion: {question}\n\nAnswer:"
)


def normalize_chat_body(body: Any, default_model: str | None, accept: str,
                        max_prompt_chars: int = MAX_JSON_BYTES) -> tuple[str, dict[str, Any], bool]:
    """(backend path, body for the backend, whether to stream). `max_prompt_chars`: the longest prompt a
    `chat_template` may fill (the JSON body limit)."""
    if not isinstance(body, dict):
        raise APIError(ErrorKind.INVALID_REQUEST, "The request body must be a JSON object.")
    _streaming_alias(body)
    if "query" in body and "messages" not in body:
        return "/v1/completions", *_query_body(body, default_model, accept, max_prompt_chars)
    return "/v1/chat/completions", *_chat_body(body, default_model, accept)


def normalize_completion_body(body: Any, default_model: str | None) -> dict[str, Any]:
    """An OpenAI completion body, relayed as it is but for the model a request leaves out."""
    if not isinstance(body, dict):
        raise APIError(ErrorKind.INVALID_REQUEST, "The request body must be a JSON object.")
    body.setdefault("model", default_model)
    return body


def _streaming_alias(body: dict[str, Any]) -> None:
    """OPEA's earlier name for `stream`."""
    if "streaming" not in body:
        return
    streaming = body.pop("streaming")
    if not isinstance(streaming, bool):
        raise APIError(ErrorKind.INVALID_REQUEST, "'streaming' must be a boolean.", "streaming")
    if "stream" in body and body["stream"] != streaming:
        raise APIError(ErrorKind.INVALID_REQUEST, "'stream' and 'streaming' disagree; send one of them.", "streaming")
    body["stream"] = streaming


def _query_body(body: dict[str, Any], default_model: str | None, accept: str,
                max_prompt_chars: int) -> tuple[dict[str, Any], bool]:
    """OPEA's LLMParamsDoc as OPEA's service handles it: the query (in `chat_template`'s {question}, with the
    `documents` in {context}; or a question-answering prompt when only documents are given) as a completion."""
    query = body.get("query")
    if not isinstance(query, str) or not query:
        raise APIError(ErrorKind.INVALID_REQUEST, "'query' must be a non-empty string.", "query")
    documents = body.get("documents") or []
    if not isinstance(documents, list):
        raise APIError(ErrorKind.INVALID_REQUEST, "'documents' must be a list.", "documents")
    if not all(isinstance(d, str) or (isinstance(d, dict) and isinstance(d.get("text", ""), str)) for d in documents):
        raise APIError(ErrorKind.INVALID_REQUEST, "'documents' must list strings or objects with a 'text' string.",
                       "documents")
    context = "\n".join(d if isinstance(d, str) else d.get("text", "") for d in documents if d)
    template = body.get("chat_template")
    if template is not None and not isinstance(template, str):
        raise APIError(ErrorKind.INVALID_REQUEST, "'chat_template' must be a string.", "chat_template")
    prompt = query
    if template:
        prompt = fill_template(template, query, context, max_chars=max_prompt_chars)
    elif context:
        prompt = fill_template(RAG_TEMPLATE, query, context, max_chars=max_prompt_chars)
    out: dict[str, Any] = {key: body[key] for key in QUERY_FIELDS if key in body}
    if "max_tokens" not in out and "max_new_tokens" in body:
        out["max_tokens"] = body["max_new_tokens"]
    unknown = sorted(set(body) - {*QUERY_FIELDS, *QUERY_DROPPED, "query", "documents", "chat_template",
                                  "max_new_tokens"})
    if unknown:
        raise APIError(ErrorKind.INVALID_REQUEST, f"Unsupported parameter(s) in a 'query' request: "
                       f"{', '.join(unknown)}.", unknown[0])
    out["prompt"] = prompt
    return _model_and_stream(out, default_model, accept)


def _chat_body(body: dict[str, Any], default_model: str | None, accept: str) -> tuple[dict[str, Any], bool]:
    messages = body.get("messages")
    if isinstance(messages, str):
        body["messages"] = [{"role": "user", "content": messages}]
    elif not isinstance(messages, list) or not messages:
        raise APIError(
            ErrorKind.INVALID_REQUEST, "'messages' must be a string or a non-empty list of messages.", "messages"
        )
    return _model_and_stream(body, default_model, accept)


def _model_and_stream(body: dict[str, Any], default_model: str | None, accept: str) -> tuple[dict[str, Any], bool]:
    if not body.get("model"):
        if not default_model:
            raise APIError(ErrorKind.INVALID_REQUEST, "'model' is required (LLM_MODEL is not set).", "model")
        body["model"] = default_model
    stream = body.get("stream")
    if stream is None:
        stream = not wants_json_only(accept)
        body["stream"] = stream
    elif not isinstance(stream, bool):
        raise APIError(ErrorKind.INVALID_REQUEST, "'stream' must be a boolean.", "stream")
    return body, stream


def wants_json_only(accept: str) -> bool:
    """The official openai client omits `stream` and sends `Accept: application/json`: it wants one JSON body."""
    types = {part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip()}
    return "application/json" in types and "text/event-stream" not in types and "*/*" not in types
