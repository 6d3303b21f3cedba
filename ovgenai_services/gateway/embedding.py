"""How the gateway embeds: a question as a query and a chunk as a document, by the fields EMBEDDING_QUERY_FIELDS and
EMBEDDING_DOCUMENT_FIELDS add to each embedding request (by default `input_type`, which chooses the model's query or
document prompt on this stack's embedding service; TEI and vLLM leave a field they do not know alone), sent as the
OpenAI client's extra body. And the record an index keeps of them, with the prompt texts the embedding service says
it puts before texts (its /v1/models; a service that does not say is not held to them): vectors of another model,
or of other prompts, are not comparable with the ones it holds, so a gateway embedding otherwise is refused rather
than answered from nearest neighbours that mean nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from langchain_core.embeddings import Embeddings

from ovgenai_common.errors import APIError, ErrorKind

# The index's record, in its collection's metadata.
MODEL_KEY, QUERY_KEY, DOCUMENT_KEY = "embedding_model", "embedding_query_fields", "embedding_document_fields"
PROMPTS_KEY = "embedding_prompts"
RECORD_KEYS = (MODEL_KEY, QUERY_KEY, DOCUMENT_KEY, PROMPTS_KEY)
# How long the service's prompts are taken as said before they are asked again (a restarted service may apply others).
PROMPTS_TTL_SECONDS = 30.0


def _text(fields: Mapping[str, Any]) -> str:
    return json.dumps(dict(fields), sort_keys=True)


@dataclass(frozen=True)
class VectorSpace:
    """The embedding model and the fields a query's and a document's requests carry: what makes two vectors
    comparable."""

    model: str
    query: dict[str, Any] = field(default_factory=dict)
    document: dict[str, Any] = field(default_factory=dict)
    # The service's prompts by name, as JSON text; None: the service does not say.
    prompts: str | None = None

    def record(self) -> dict[str, str]:
        """This space as an index records it."""
        record = {MODEL_KEY: self.model, QUERY_KEY: _text(self.query), DOCUMENT_KEY: _text(self.document)}
        return record if self.prompts is None else {**record, PROMPTS_KEY: self.prompts}

    def differs(self, recorded: Mapping[str, Any]) -> bool:
        """Whether a record says otherwise about anything both it and this space know (an index of an earlier
        version records no prompts; a service that does not say them is not held to them)."""
        mine = self.record()
        return any(key in mine and recorded[key] != mine[key] for key in recorded)

    def conflict(self, recorded: Mapping[str, Any], index: str) -> APIError:
        """The refusal of an index whose chunks were embedded in another space, naming both."""
        return APIError(
            ErrorKind.CONFLICT,
            f"The index '{index}' was built with embedding model '{recorded.get(MODEL_KEY)}' (queries "
            f"{recorded.get(QUERY_KEY)}, documents {recorded.get(DOCUMENT_KEY)}, prompts "
            f"{recorded.get(PROMPTS_KEY, 'unknown')}), but this gateway embeds with '{self.model}' (queries "
            f"{_text(self.query)}, documents {_text(self.document)}, prompts {self.prompts or 'unknown'}): their "
            "vectors cannot be compared. Set EMBEDDING_MODEL_ID, the embedding fields and the embedding service's "
            "prompts back, use another COLLECTION_NAME, or delete every document (file_path 'all') and ingest them "
            "again.")


def recorded_space(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The record an index's metadata holds (empty where it holds none: made before indexes kept one)."""
    return {key: metadata[key] for key in RECORD_KEYS if key in metadata}


class ServicePrompts:
    """The prompts the embedding service says it puts before texts, from its /v1/models (this stack's embedding
    service lists them with the model); None where it does not say or cannot be asked. Asked again after
    PROMPTS_TTL_SECONDS."""

    def __init__(self, client: httpx.AsyncClient, model: str):
        self.client, self.model = client, model
        self._text: str | None = None
        self._asked = -PROMPTS_TTL_SECONDS

    async def __call__(self) -> str | None:
        if time.monotonic() - self._asked < PROMPTS_TTL_SECONDS:
            return self._text
        try:
            response = await self.client.get("/v1/models")
            models = response.json().get("data", []) if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            return None  # not cached: asked again with the next request
        mine = [entry for entry in models if isinstance(entry, dict) and entry.get("id") == self.model]
        entry = mine[0] if mine else models[0] if len(models) == 1 and isinstance(models[0], dict) else {}
        prompts = entry.get("prompts")
        self._text = _text(prompts) if isinstance(prompts, dict) else None
        self._asked = time.monotonic()
        return self._text


class Embedder:
    """LangChain's embedding client, each request carrying its space's fields for a query or for documents (the
    OpenAI client's extra_body, which OpenAIEmbeddings passes on)."""

    def __init__(self, embeddings: Embeddings, space: VectorSpace,
                 prompts: Callable[[], Awaitable[str | None]] | None = None):
        self.embeddings = embeddings
        self.space = space
        self.prompts = prompts

    async def current_space(self) -> VectorSpace:
        """The space with the prompts the service says it applies now."""
        return self.space if self.prompts is None else replace(self.space, prompts=await self.prompts())

    async def query(self, text: str) -> list[float]:
        return await self.embeddings.aembed_query(text, **_extra(self.space.query))

    async def documents(self, texts: list[str]) -> list[list[float]]:
        return await self.embeddings.aembed_documents(texts, **_extra(self.space.document))


def _extra(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {"extra_body": dict(fields)} if fields else {}
