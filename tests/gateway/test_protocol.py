"""OPEA's ChatQnA body: messages as a string or a list (text parts joined), stream on by default (off for the
OpenAI route), the LLM's sampling passed on only where given, fields it does not know ignored."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ovgenai_services.gateway.protocol import ChatQnARequest, OpenAIChatRequest, RetrieveRequest


def test_messages_as_a_string_or_a_list_of_texts():
    assert ChatQnARequest(messages="Q?").turns() == [{"role": "user", "content": "Q?"}]
    body = ChatQnARequest(messages=[{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": "b"}]}])
    assert body.turns() == [{"role": "user", "content": "a\nb"}]


def test_stream_defaults_differ_by_route_and_unknown_fields_are_ignored():
    assert ChatQnARequest(messages="Q?").stream and not OpenAIChatRequest(messages="Q?").stream
    assert ChatQnARequest(messages="Q?", opea_field=1).model_extra in (None, {})


def test_sampling_is_what_the_client_set_with_stop_as_a_list():
    assert ChatQnARequest(messages="Q?").sampling() == {}
    body = ChatQnARequest(messages="Q?", top_p=0.9, seed=3, stop="END", max_tokens=5, temperature=0.1)
    assert body.sampling() == {"top_p": 0.9, "seed": 3, "stop": ["END"]}


@pytest.mark.parametrize("body", [{"messages": []}, {"messages": "Q?", "k": 0}, {"messages": "Q?", "stream": 1},
                                  {"messages": [{"role": "tool", "content": "x"}]}])
def test_values_are_checked_strictly(body):
    with pytest.raises(ValidationError):
        ChatQnARequest(**body)


def test_retrieval_refuses_fields_it_does_not_know():
    with pytest.raises(ValidationError):
        RetrieveRequest(query="q", collection="x")
