"""A request's values checked and put in the pipeline's and ingestion's terms: the chunking, the link list's depth,
the question with the configuration's defaults, and the stored document a delete names."""

from __future__ import annotations

import pytest

from ovgenai_services.gateway.ingestion.ingest import Chunking
from ovgenai_services.gateway.protocol import ChatQnARequest, RetrieveRequest
from ovgenai_services.gateway.validation import (
    Defaults,
    chunking,
    document_named,
    links_of,
    question_of,
    retrieval_query,
)
from tests.support.replies import raised

DEFAULTS = Defaults(k=4, top_n=1, max_tokens=512, temperature=0.0)


def test_chunking_takes_the_request_s_values_else_the_configured_ones():
    default = Chunking(1000, 100)
    assert chunking(None, None, default) == default
    assert chunking(150, None, default) == Chunking(150, 75)  # the default overlap, at most half the size chosen
    assert chunking(None, 0, default) == Chunking(1000, 0)
    error = raised(chunking, 100, 100, default)
    assert (error.status, error.param) == (400, "chunk_overlap")


def test_a_link_list_is_bounded_in_depth_and_number():
    assert links_of('["https://example.com"]', max_links=2, max_json_depth=4) == ["https://example.com"]
    assert links_of(None, max_links=2, max_json_depth=4) == []
    assert raised(links_of, "[" * 10 + "]" * 10, max_links=2, max_json_depth=4).param == "link_list"
    assert "at most 1" in raised(links_of, '["https://a.com", "https://b.com"]', 1, 4).message


def test_a_blank_retrieval_query_names_query():
    assert retrieval_query(RetrieveRequest(query="canals")) == "canals"
    assert raised(retrieval_query, RetrieveRequest(query="   ")).param == "query"


def test_a_question_takes_the_defaults_the_request_leaves():
    question = question_of(ChatQnARequest(messages="How long is the canal?"), DEFAULTS)
    assert (question.k, question.top_n, question.llm) == (4, 1, {"max_tokens": 512, "temperature": 0.0})
    asked = question_of(ChatQnARequest(messages="Q?", k=2, top_n=3, max_completion_tokens=9, temperature=0.5,
                                       top_k=5, stop="x"), DEFAULTS)
    assert (asked.k, asked.top_n) == (2, 3)
    assert asked.llm == {"max_tokens": 9, "temperature": 0.5, "top_k": 5, "stop": ["x"]}


def test_instructions_are_the_client_s_system_and_developer_messages():
    body = ChatQnARequest(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                    {"role": "assistant", "content": "Hello"},
                                    {"role": "developer", "content": "Cite."}, {"role": "user", "content": "Q?"}])
    question = question_of(body, DEFAULTS)
    assert question.instructions == "Be brief.\n\nCite."
    assert [m["role"] for m in question.messages] == ["user", "assistant", "user"]


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A"}]}, "messages"),
    ({"messages": "   "}, "messages"),
    ({"messages": "Q?", "search_type": "similarity_distance_threshold"}, "distance_threshold"),
    ({"messages": "Q?", "chat_template": "Context: {context}"}, "chat_template"),
])
def test_a_question_that_cannot_be_answered_names_the_field(body, param):
    error = raised(question_of, ChatQnARequest(**body), DEFAULTS)
    assert (error.status, error.param) == (400, param)


def test_the_search_is_opea_s():
    search = question_of(ChatQnARequest(messages="Q?", search_type="mmr", fetch_k=30, lambda_mult=0.2),
                         DEFAULTS).search
    assert (search.type, search.fetch_k, search.lambda_mult, search.distance_threshold) == ("mmr", 30, 0.2, 2.0)


class Stored:
    def __init__(self, *names: str):
        self.names = set(names)

    async def has(self, name: str) -> bool:
        return name in self.names


@pytest.mark.parametrize(("file_path", "stored", "found"), [
    ("notes.txt", "notes.txt", "notes.txt"),
    ("https://example.com/page.txt", "https://example.com/page", "https://example.com/page"),  # OPEA's <url>.txt
    ("https://example.com/page.txt", "https://example.com/page.txt", "https://example.com/page.txt"),
    ("folder/notes.txt", "notes.txt", "notes.txt"),  # a file's path: stored by its base name
    ("missing.txt", "notes.txt", None),
    ("..", "notes.txt", None),  # no name at all
])
async def test_the_document_a_delete_names(file_path, stored, found):
    assert await document_named(Stored(stored), file_path) == found
