"""How the gateway embeds: a question as a query and a chunk as a document, by the fields EMBEDDING_QUERY_FIELDS and
EMBEDDING_DOCUMENT_FIELDS add to each embedding request (by default `input_type`, which chooses the model's query or
document prompt on this stack's embedding service; TEI and vLLM leave a field they do not know alone), sent as the
OpenAI client's extra body. And the record an index keeps of them: vectors of another model, or of other prompts,
are not comparable with the ones it holds, so a gateway embedding otherwise is refused rather than answered from
nearest neighbours that mean nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from ovgenai_common.errors import APIError, ErrorKind

# The index's record, in its collection's metadata.
MODEL_KEY, QUERY_KEY, DOCUMENT_KEY = "embedding_model", "embedding_query_fields", "embedding_document_fields"


def _text(fields: Mapping[str, Any]) -> str:
    return json.dumps(dict(fields), sort_keys=True)


@dataclass(frozen=True)
class VectorSpace:
    """The embedding model and the fields a query's and a document's requests carry: what makes two vectors
    comparable."""

    model: str
    query: dict[str, Any] = field(default_factory=dict)
    document: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, str]:
        """This space as an index records it."""
        return {MODEL_KEY: self.model, QUERY_KEY: _text(self.query), DOCUMENT_KEY: _text(self.document)}

    def conflict(self, recorded: Mapping[str, Any], index: str) -> APIError:
        """The refusal of an index whose chunks were embedded in another space, naming both."""
        return APIError(
            ErrorKind.CONFLICT,
            f"The index '{index}' was built with embedding model '{recorded.get(MODEL_KEY)}' (queries "
            f"{recorded.get(QUERY_KEY)}, documents {recorded.get(DOCUMENT_KEY)}), but this gateway embeds with "
            f"'{self.model}' (queries {_text(self.query)}, documents {_text(self.document)}): their vectors cannot be "
            "compared. Set EMBEDDING_MODEL_ID and the embedding fields back, use another COLLECTION_NAME, or delete "
            "every document (file_path 'all') and ingest them again.")


def recorded_space(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The record an index's metadata holds (empty where it holds none: made before indexes kept one)."""
    return {key: metadata[key] for key in (MODEL_KEY, QUERY_KEY, DOCUMENT_KEY) if key in metadata}


class Embedder:
    """LangChain's embedding client, each request carrying its space's fields for a query or for documents (the
    OpenAI client's extra_body, which OpenAIEmbeddings passes on)."""

    def __init__(self, embeddings: Embeddings, space: VectorSpace):
        self.embeddings = embeddings
        self.space = space

    async def query(self, text: str) -> list[float]:
        return await self.embeddings.aembed_query(text, **_extra(self.space.query))

    async def documents(self, texts: list[str]) -> list[list[float]]:
        return await self.embeddings.aembed_documents(texts, **_extra(self.space.document))


def _extra(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {"extra_body": dict(fields)} if fields else {}
