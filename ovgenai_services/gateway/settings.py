"""The gateway's settings, with OPEA ChatQnA's environment names where they exist."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from ovgenai_common.body import Pace
from ovgenai_common.names import DEFAULT_EMBEDDING, DEFAULT_LLM
from ovgenai_common.settings import JsonObject, ResponseStoreSettings, ServiceSettings

# Bounds of chunk_size and chunk_overlap, for the settings and for each ingest request alike.
MIN_CHUNK_SIZE, MAX_CHUNK_SIZE = 50, 10_000

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(value: Any) -> Any:
    """A comma-separated list of networks (`10.0.0.0/8,fd00::/8`), as an environment variable carries it."""
    if isinstance(value, str):
        return [ipaddress.ip_network(part.strip(), strict=False) for part in value.split(",") if part.strip()]
    return value


DEFAULT_PROMPT = (
    "You are a helpful assistant. Answer the question using the context below. "
    "If the context does not contain the answer, say that you don't know.\n\n"
    "Context:\n{context}"
)


class GatewaySettings(ResponseStoreSettings, ServiceSettings):
    port: int = Field(8888, ge=0, le=65535)
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Largest request (uploads included).")
    embedding_endpoint: str = Field(
        "http://localhost:6000",
        validation_alias=AliasChoices("embedding_endpoint", "EMBEDDING_SERVER_ENDPOINT", "TEI_EMBEDDING_ENDPOINT"),
        description="Base URL of the embedding service (or any OpenAI-compatible embeddings server).",
    )
    embedding_model: str = Field(
        DEFAULT_EMBEDDING, validation_alias=AliasChoices("embedding_model", "EMBEDDING_MODEL_ID"),
        description="Model name sent with each embedding request.",
    )
    embedding_api_key: str = Field("unused", validation_alias=AliasChoices("embedding_api_key", "EMBEDDING_API_KEY"),
                                   description="Sent to the embedding service (its SERVICE_API_KEY).")
    embedding_query_fields: JsonObject = Field(
        default_factory=lambda: {"input_type": "query"},
        description="Fields added to the embedding request of a question, as a JSON object: input_type chooses the "
        "model's query prompt on this stack's embedding service (Cohere, Voyage and NVIDIA NIM take it too; TEI and "
        "vLLM leave it alone); '{\"prompt_name\": \"...\"}' names one of its prompts; '{}' sends none (OpenAI's "
        "own API refuses fields it does not know). The index records them with the model.")
    embedding_document_fields: JsonObject = Field(
        default_factory=lambda: {"input_type": "document"},
        description="Fields added to the embedding requests of ingested chunks, as EMBEDDING_QUERY_FIELDS for "
        "questions: input_type document chooses the model's document prompt.")
    llm_endpoint: str = Field(
        "http://localhost:9000",
        validation_alias=AliasChoices("llm_endpoint", "LLM_SERVER_ENDPOINT", "LLM_SERVICE_ENDPOINT"),
        description="Base URL of the LLM microservice (or any OpenAI-compatible chat server).",
    )
    llm_model: str = Field(
        DEFAULT_LLM, validation_alias=AliasChoices("llm_model", "LLM_MODEL_ID", "LLM_MODEL"),
        description="Model name sent with each chat request.",
    )
    llm_api_key: str = Field("unused", validation_alias=AliasChoices("llm_api_key", "LLM_API_KEY"),
                             description="Sent to the LLM microservice (its SERVICE_API_KEY).")
    pipeline_name: str = Field("chatqna", description="Model name under which /v1/models lists the RAG pipeline.")
    # OPEA's ChatQnA megaservice names its upstreams by host and port: read where no endpoint above is set.
    embedding_server_host_ip: str | None = Field(
        None, validation_alias=AliasChoices("embedding_server_host_ip", "EMBEDDING_SERVER_HOST_IP"),
        description="OPEA's name: the embedding service's host (with EMBEDDING_SERVER_PORT, 6000 unset), where "
        "EMBEDDING_SERVER_ENDPOINT is not set.")
    embedding_server_port: int | None = Field(
        None, validation_alias=AliasChoices("embedding_server_port", "EMBEDDING_SERVER_PORT"),
        description="OPEA's name: the embedding service's port.")
    llm_server_host_ip: str | None = Field(
        None, validation_alias=AliasChoices("llm_server_host_ip", "LLM_SERVER_HOST_IP"),
        description="OPEA's name: the LLM microservice's host (with LLM_SERVER_PORT, 9000 unset), where "
        "LLM_SERVER_ENDPOINT is not set.")
    llm_server_port: int | None = Field(
        None, validation_alias=AliasChoices("llm_server_port", "LLM_SERVER_PORT"),
        description="OPEA's name: the LLM microservice's port.")
    rerank_server_host_ip: str | None = Field(
        None, validation_alias=AliasChoices("rerank_server_host_ip", "RERANK_SERVER_HOST_IP"),
        description="OPEA's name: the rerank service's host (with RERANK_SERVER_PORT, 6000 unset), where "
        "RERANK_SERVER_ENDPOINT is not set.")
    rerank_server_port: int | None = Field(
        None, validation_alias=AliasChoices("rerank_server_port", "RERANK_SERVER_PORT"),
        description="OPEA's name: the rerank service's port.")
    data_dir: str = Field("data/gateway", validation_alias=AliasChoices("data_dir", "DATA_DIR"),
                          description="Folder of the embedded vector store and of uploads being ingested.")
    vector_store: Literal["embedded", "server"] = Field(
        "embedded", description="embedded: Chroma persisted under data_dir; server: a Chroma server (scale-out)."
    )
    chroma_host: str = Field("localhost", validation_alias=AliasChoices("chroma_host", "CHROMA_HOST"),
                             description="VECTOR_STORE=server: the Chroma server's host.")
    chroma_port: int = Field(8000, validation_alias=AliasChoices("chroma_port", "CHROMA_PORT"),
                             description="VECTOR_STORE=server: the Chroma server's port.")
    collection: str = Field(
        "chatqna", validation_alias=AliasChoices("collection", "COLLECTION_NAME", "INDEX_NAME"),
        description="The default index: the Chroma collection of requests that name no index_name.")
    max_indices: int = Field(64, ge=1, description="Indices the store may hold, the default one included (each a "
                                                   "Chroma collection, made by its first ingest).")
    chunk_size: int = Field(1000, ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE,
                            description="Characters per chunk (an ingest request's chunk_size overrides it).")
    chunk_overlap: int = Field(100, ge=0, lt=MAX_CHUNK_SIZE,
                               description="Characters shared by neighbouring chunks (chunk_overlap overrides it).")
    embed_batch_size: int = Field(64, ge=1, description="Chunks embedded per call during ingestion.")
    max_upload_bytes: int = Field(50 * 1024 * 1024, ge=1, description="Largest uploaded file.")
    max_html_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Largest HTML page parsed (upload or link): a page of a few tags with "
        "millions of attributes takes libxml2 about 16 bytes of memory per byte, any other page a few MB.")
    max_parsed_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Largest JSON file, and most XML of an Office file (DOCX, PPTX; an XLSX's "
        "shared strings and styles) read whole: their parsers hold it as Python objects, several times its size.")
    ingest_concurrency: int = Field(2, ge=1, description="Ingest requests processed at once, each on a worker "
                                                         "thread of ingestion's own pool.")
    ingest_bodies: int = Field(
        8, ge=1, description="Ingest requests whose bodies the gateway reads or holds at once (arriving, waiting "
        "for a slot, or being ingested), at least INGEST_CONCURRENCY: it bounds their memory and temporary disk at "
        "this many times MAX_REQUEST_BYTES. A slot is taken only once a body has arrived, so slow senders hold these "
        "places, never a slot.")
    ingest_queue: int = Field(16, ge=0, description="Ingest requests that wait for a place (INGEST_BODIES), their "
                                                    "bodies not yet read; beyond them, ingests are refused with a 429.")
    upload_min_rate: float = Field(
        16 * 1024, gt=0, description="Bytes per second an ingest's body must average once UPLOAD_GRACE has passed "
        "(128 kbit/s, below any link documents are uploaded over); a slower one gets a 408. A body of n bytes thus "
        "has UPLOAD_GRACE + n / UPLOAD_MIN_RATE seconds: a client trickling a byte now and then cannot hold its "
        "place for ever.")
    upload_grace: float = Field(
        30.0, gt=0, description="Seconds any ingest body may take whatever its size (the floor of its deadline: a "
        "small body over a slow or distant link), before UPLOAD_MIN_RATE applies.")
    stale_ingest_seconds: float = Field(
        3600.0, gt=0, description="VECTOR_STORE=server: at start-up, uncommitted chunks and upload spool folders "
        "this old are removed (younger ones may belong to another replica's ingest). The embedded store removes "
        "all of them.")
    # TOP_K keeps its name for existing deployments; in OPEA's request bodies the retrieval depth is `k`, and
    # `top_k` is the LLM's sampling parameter.
    top_k: int = Field(4, ge=1, le=50, description="Chunks retrieved per question (the default of a request's k).")
    rerank_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("rerank_endpoint", "RERANK_SERVER_ENDPOINT", "TEI_RERANKING_ENDPOINT"),
        description="Base URL of a TEI-style /rerank (the embedding service with RERANK_MODEL_PATH, or TEI); "
        "when set, the k retrieved chunks are reranked and the best top_n kept.",
    )
    rerank_model_id: str | None = Field(
        None,
        validation_alias=AliasChoices("rerank_model_id", "RERANK_MODEL_ID"),
        description="The reranker (OPEA's name). Set without RERANK_SERVER_ENDPOINT, the embedding service reranks: "
        "it serves RERANK_MODEL_ID too.",
    )
    rerank_api_key: str = Field("unused", validation_alias=AliasChoices("rerank_api_key", "RERANK_API_KEY"),
                                description="Sent to the reranker (its SERVICE_API_KEY).")
    top_n: int = Field(1, ge=1, le=50, description="Chunks the reranker keeps (the default of a request's top_n).")
    link_allowed_networks: Annotated[list[Network], NoDecode, BeforeValidator(_networks)] = Field(
        default_factory=list,
        description="Networks that link_list URLs may reach although they are not public (loopback, link-local, "
        "private, ...), comma-separated, e.g. '10.0.0.0/8,fd00::/8'; '0.0.0.0/0,::/0' allows every address.",
    )
    link_max_bytes: int = Field(10 * 1024 * 1024, ge=1, description="Largest page or file fetched from a link.")
    link_timeout: float = Field(30.0, gt=0, description="Seconds one link may take, redirects included.")
    link_max_redirects: int = Field(5, ge=0, le=20, description="Redirects followed per link.")
    max_links: int = Field(20, ge=1, description="Links one ingest request may name.")
    prompt_template: str = Field(DEFAULT_PROMPT, description="System prompt; {context} receives the chunks.")
    history: Literal["pass", "condense"] = Field(
        "pass", description="pass: earlier turns go to the LLM; condense: they rewrite the question first."
    )
    max_tokens: int = Field(512, ge=1, description="Default answer length.")
    temperature: float | None = Field(
        None, ge=0, le=2, description="Default sampling temperature of answers (a request's temperature overrides it). "
        "Unset: the model's own defaults (its generation_config.json, as the backend applies them).")
    request_timeout: float = Field(300.0, gt=0, description="Seconds to wait for the LLM or embedding service.")

    @field_validator("embedding_api_key", "llm_api_key", "rerank_api_key", mode="before")
    @classmethod
    def _unset_key(cls, value: Any) -> Any:
        """An empty key (compose's unset API_KEY) is no key: the OpenAI client needs a placeholder."""
        return "unused" if value is None or value == "" else value

    @model_validator(mode="after")
    def _opea_hosts_and_ports(self) -> GatewaySettings:
        """The endpoints OPEA's megaservice variables name, where the endpoints themselves are not set."""
        for endpoint, host, port, default in (
            ("embedding_endpoint", self.embedding_server_host_ip, self.embedding_server_port, 6000),
            ("llm_endpoint", self.llm_server_host_ip, self.llm_server_port, 9000),
            ("rerank_endpoint", self.rerank_server_host_ip, self.rerank_server_port, 6000),
        ):
            if host and endpoint not in self.model_fields_set:
                host = f"[{host}]" if ":" in host else host
                setattr(self, endpoint, f"http://{host}:{port or default}")
        return self

    @model_validator(mode="after")
    def _rerank_on_the_embedding_service(self) -> GatewaySettings:
        if not self.rerank_endpoint and self.rerank_model_id and self.rerank_model_id.strip():
            self.rerank_endpoint = self.embedding_endpoint
        return self

    @model_validator(mode="after")
    def _a_place_for_every_slot(self) -> GatewaySettings:
        if self.ingest_bodies < self.ingest_concurrency:
            raise ValueError(f"INGEST_BODIES ({self.ingest_bodies}) must be at least INGEST_CONCURRENCY "
                             f"({self.ingest_concurrency}): a request holds a place while it has a slot")
        return self

    @property
    def upload_pace(self) -> Pace:
        return Pace(self.upload_min_rate, self.upload_grace)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> GatewaySettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"CHUNK_OVERLAP ({self.chunk_overlap}) must be smaller than CHUNK_SIZE "
                             f"({self.chunk_size})")
        return self
