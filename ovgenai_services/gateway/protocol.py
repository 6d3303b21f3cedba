"""Requests and responses of the gateway: OPEA's ChatQnA body (messages may be a string, stream defaults to true,
`k` retrieval depth, `top_n` reranker keep, `top_k` LLM sampling), the OpenAI chat body (`OpenAIChatRequest`), and
OPEA's dataprep shapes.

The chat bodies ignore fields they do not know, as OPEA's own model does (OPEA clients send fields of their own);
the values of the fields they know are checked strictly.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ovgenai_common.protocol import FLOAT32_SMALLEST_NORMAL, StreamOptions, TextPart

SearchType = Literal["similarity", "similarity_score_threshold", "similarity_distance_threshold", "mmr"]


class Message(BaseModel):
    model_config = ConfigDict(strict=True)

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "\n".join(p.text for p in self.content)


class ChatQnARequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    messages: str | Annotated[list[Message], Field(min_length=1)]
    model: str | None = None
    stream: bool = True
    stream_options: StreamOptions | None = Field(
        None, description="OpenAI's: include_usage adds a last chunk with the LLM's token counts (the openai format)."
    )
    max_tokens: Annotated[int, Field(ge=1, le=8192)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1, le=8192)] | None = Field(
        None, description="OpenAI's newer name for max_tokens (LangChain sends it)."
    )
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    # The LLM's sampling, passed on only when given (the backend's defaults apply otherwise).
    top_k: Annotated[int, Field(ge=-1)] | None = Field(None, description="LLM sampling: the k most likely tokens.")
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repetition_penalty: Annotated[float, Field(ge=FLOAT32_SMALLEST_NORMAL, le=10)] | None = None
    seed: int | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    chat_template: str | None = Field(
        None, description="OPEA's prompt template: {context} receives the chunks, {question} the question."
    )
    # Retrieval and reranking, as OPEA's ChatQnA megaservice names them.
    k: Annotated[int, Field(ge=1, le=50)] | None = Field(None, description="Chunks retrieved (default TOP_K).")
    top_n: Annotated[int, Field(ge=1, le=50)] | None = Field(
        None, description="Chunks the reranker keeps, when one is configured (default TOP_N)."
    )
    search_type: SearchType = "similarity"
    fetch_k: Annotated[int, Field(ge=1, le=200)] = Field(20, description="mmr: candidates considered.")
    lambda_mult: Annotated[float, Field(ge=0, le=1)] = Field(0.5, description="mmr: 1 relevance, 0 diversity.")
    score_threshold: Annotated[float, Field(ge=0, le=1)] = Field(
        0.2, description="similarity_score_threshold: the lowest cosine similarity kept."
    )
    distance_threshold: Annotated[float, Field(ge=0, le=2)] | None = Field(
        None, description="similarity_distance_threshold: the largest cosine distance kept."
    )
    index_name: str | None = Field(None, description="The index to search (default COLLECTION_NAME); an unknown one "
                                   "is a 404.")

    def turns(self) -> list[dict[str, str]]:
        if isinstance(self.messages, str):
            return [{"role": "user", "content": self.messages}]
        return [{"role": m.role, "content": m.text()} for m in self.messages]

    def sampling(self) -> dict[str, Any]:
        """The LLM parameters the client set, besides max_tokens and temperature."""
        names = ("top_k", "top_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "seed", "stop")
        given = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if isinstance(given.get("stop"), str):
            given["stop"] = [given["stop"]]
        return given


class OpenAIChatRequest(ChatQnARequest):
    """The gateway's /v1/chat/completions: ChatQnA's body with OpenAI's default of no stream. Unlike the shared
    `ovgenai_common.protocol.ChatCompletionRequest` (the backend's, which refuses fields it does not know), it
    ignores them, since OPEA's and LangChain's clients send fields of their own to a RAG pipeline."""

    stream: bool = False


class DeleteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    file_path: str = Field(min_length=1, description="A document's id (as /v1/dataprep/get lists it), or 'all': "
                           "every document of the index, and the index with them (but the default one).")
    index_name: str | None = Field(None, description="The index (default COLLECTION_NAME); 'all', or none with "
                                   "file_path 'all', is every index, as in OPEA.")


class GetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    index_name: str | None = Field(None, description="The index (default COLLECTION_NAME), or 'all'; an index that "
                                   "does not exist lists nothing, as in OPEA.")


class RetrieveRequest(BaseModel):
    # Strict: a field the gateway does not know, or `true` for a number, is a client's mistake worth a 400.
    model_config = ConfigDict(extra="forbid", strict=True)

    query: Annotated[str, Field(min_length=1)]
    k: Annotated[int, Field(ge=1, le=50)] | None = None
    top_n: Annotated[int, Field(ge=1, le=50)] | None = None
    index_name: str | None = Field(None, description="The index to search (default COLLECTION_NAME).")


class DocumentEntry(BaseModel):
    """OPEA's entry (name, id, type, parent), how many chunks the document has, and its index."""

    name: str
    id: str
    type: Literal["File"]
    parent: str
    chunks: int
    index_name: str


class IngestedDocument(BaseModel):
    name: str
    chunks: int
    status: Literal["ingested", "replaced", "unchanged"]


class IngestResponse(BaseModel):
    """OPEA's body (status, message), and what happened to each document."""

    status: Literal[200]
    message: str
    documents: list[IngestedDocument]
    total_chunks: int


class DeleteResponse(BaseModel):
    status: Literal[True]
    deleted_chunks: int
