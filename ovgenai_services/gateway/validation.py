"""A request's values checked against the gateway's configuration and put in the terms of the pipeline and of
ingestion: its chunking, its question, its links, the stored document it means to delete. The index a request names
is the indices' to check (indices.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ovgenai_common.body import loads
from ovgenai_common.errors import APIError, ErrorKind

from .ingestion.files import safe_name
from .ingestion.ingest import Chunking
from .ingestion.links import parse_link_list
from .protocol import ChatQnARequest, RetrieveRequest
from .rag import Question
from .store import DocumentStore, Search

# A link's document is named by its URL; OPEA names it `<url>.txt`, and its clients may delete it by that name.
OPEA_LINK_SUFFIX = ".txt"


@dataclass(frozen=True)
class Defaults:
    """What a question leaves to the configuration: TOP_K, TOP_N, MAX_TOKENS and TEMPERATURE."""

    k: int
    top_n: int
    max_tokens: int
    temperature: float | None  # None: the model's own (the backend applies its generation_config.json)


def chunking(size: int | None, overlap: int | None, default: Chunking) -> Chunking:
    """An ingest's chunking: its own size and overlap, else CHUNK_SIZE and CHUNK_OVERLAP (`default`), the overlap
    at most half of a size the request chose."""
    size = size or default.size
    if overlap is None:
        overlap = min(default.overlap, size // 2)
    elif overlap >= size:
        raise APIError(ErrorKind.INVALID_REQUEST,
                       f"'chunk_overlap' ({overlap}) must be smaller than the chunk size ({size}).", "chunk_overlap")
    return Chunking(size, overlap)


def links_of(link_list: str | None, max_links: int, max_json_depth: int) -> list[str]:
    """OPEA's `link_list` form field: a JSON array, by the shared JSON rules (no middleware parses a form field): within
    the depth limit, and no unpaired surrogate (a 500 where the link became a URL)."""
    if link_list and link_list.strip():
        loads(link_list, max_json_depth, "link_list")
    return parse_link_list(link_list, max_links)


def retrieval_query(body: RetrieveRequest) -> str:
    """The text /v1/retrieve searches for; a blank one was refused by the embedding service, naming its own field."""
    if not body.query.strip():
        raise APIError(ErrorKind.INVALID_REQUEST, "'query' must contain text.", "query")
    return body.query


def question_of(body: ChatQnARequest, defaults: Defaults) -> Question:
    turns = body.turns()
    if turns[-1]["role"] != "user" or not turns[-1]["content"].strip():
        raise APIError(ErrorKind.INVALID_REQUEST, "The last message must be a non-empty user message.", "messages")
    if body.search_type == "similarity_distance_threshold" and body.distance_threshold is None:
        raise APIError(ErrorKind.INVALID_REQUEST, "search_type 'similarity_distance_threshold' needs "
                                                  "'distance_threshold'.", "distance_threshold")
    if body.chat_template is not None and "{question}" not in body.chat_template:
        raise APIError(ErrorKind.INVALID_REQUEST, "'chat_template' must contain {question} (and {context} for the "
                                                  "retrieved chunks).", "chat_template")
    temperature = defaults.temperature if body.temperature is None else body.temperature
    llm = {
        "max_tokens": body.max_tokens or body.max_completion_tokens or defaults.max_tokens,
        **({"temperature": temperature} if temperature is not None else {}),
        **body.sampling(),
    }
    return Question(
        messages=[t for t in turns if t["role"] in ("user", "assistant")],
        k=body.k or defaults.k,
        top_n=body.top_n or defaults.top_n,
        llm=llm,
        search=Search(body.search_type, body.fetch_k, body.lambda_mult, body.score_threshold,
                      2.0 if body.distance_threshold is None else body.distance_threshold),
        chat_template=body.chat_template,
        instructions="\n\n".join(t["content"] for t in turns if t["role"] in ("system", "developer")),
    )


async def document_named(store: DocumentStore, file_path: str) -> str | None:
    """The stored document a client's file_path names: its id, OPEA's `<url>.txt` for a link, or a file's path."""
    candidates = [file_path]
    if file_path.endswith(OPEA_LINK_SUFFIX) and file_path.startswith(("http://", "https://")):
        candidates.append(file_path.removesuffix(OPEA_LINK_SUFFIX))
    if not file_path.startswith(("http://", "https://")):
        try:
            candidates.append(safe_name(file_path))
        except APIError:
            pass
    for name in candidates:
        if await store.has(name):
            return name
    return None
