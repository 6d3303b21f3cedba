"""OPEA's request conventions: string messages, stream by default unless the client asks for JSON only, `streaming`
for `stream`, and the `query` form asking for a completion."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import APIError
from ovgenai_services.llm.protocol import normalize_chat_body, normalize_completion_body, wants_json_only


def test_string_messages_become_one_user_message():
    path, body, stream = normalize_chat_body({"messages": "hi"}, "m", "*/*")
    assert body == {"messages": [{"role": "user", "content": "hi"}], "model": "m", "stream": True}
    assert stream and path == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("accept", "json_only"),
    [("application/json", True), ("application/json, text/event-stream", False), ("*/*", False), ("", False),
     ("text/event-stream", False), ("application/json; charset=utf-8", True)],
)
def test_accept_header(accept, json_only):
    assert wants_json_only(accept) is json_only


def test_explicit_stream_wins():
    _, _, stream = normalize_chat_body({"messages": "hi", "stream": False, "model": "x"}, None, "*/*")
    assert stream is False


def test_streaming_is_opeas_earlier_name_for_stream():
    _, body, stream = normalize_chat_body({"messages": "hi", "streaming": False}, "m", "*/*")
    assert stream is False and body["stream"] is False and "streaming" not in body
    with pytest.raises(APIError, match="disagree"):
        normalize_chat_body({"messages": "hi", "streaming": False, "stream": True}, "m", "*/*")


def test_the_query_form_is_a_completion_as_opea_asks_for_it():
    # The body of OPEA's guide, as its curl sends it.
    opea = {"query": "What is Deep Learning?", "max_tokens": 17, "top_k": 10, "top_p": 0.95, "typical_p": 0.95,
            "temperature": 0.01, "repetition_penalty": 1.03, "streaming": False}
    path, body, stream = normalize_chat_body(opea, "m", "*/*")
    assert (path, stream) == ("/v1/completions", False)
    assert body == {"model": "m", "prompt": "What is Deep Learning?", "max_tokens": 17, "top_k": 10, "top_p": 0.95,
                    "temperature": 0.01, "repetition_penalty": 1.03, "stream": False}


def test_the_query_form_fills_the_template_with_the_documents():
    _, body, _ = normalize_chat_body({"query": "Q?", "documents": ["a", {"text": "b"}], "max_new_tokens": 5,
                                      "chat_template": "{context}|{question}"}, "m", "*/*")
    assert body["prompt"] == "a\nb|Q?" and body["max_tokens"] == 5
    _, body, _ = normalize_chat_body({"query": "Q?", "documents": ["a"]}, "m", "*/*")
    assert "Q?" in body["prompt"] and "a" in body["prompt"]
    with pytest.raises(APIError, match="logit_bias"):
        normalize_chat_body({"query": "Q?", "logit_bias": {}}, "m", "*/*")


@pytest.mark.parametrize("body", [[], {"messages": []}, {"messages": 3}, {"messages": "hi", "stream": "yes"},
                                  {"messages": "hi"}, {"messages": "hi", "streaming": 1}, {"query": ""},
                                  {"query": "q", "chat_template": 3}])
def test_bad_bodies(body):
    with pytest.raises(APIError):
        normalize_chat_body(body, None, "*/*")


@pytest.mark.parametrize("documents", [[5], [["a"]], [{"text": 1}], ["a", None, 5]])
def test_documents_that_are_not_texts_are_400_naming_them(documents):
    """They were a 500 (an AttributeError reading 'text' from a list)."""
    with pytest.raises(APIError) as error:
        normalize_chat_body({"query": "q", "documents": documents}, "m", "*/*")
    assert error.value.param == "documents"


@pytest.mark.parametrize("template", ["{question.__class__.__mro__}", "{question[0]}", "{question:>300000000}",
                                      "{nope} {", "}{question}"])
def test_the_template_is_filled_not_formatted(template):
    """str.format read attributes of the question into the prompt, padded it to 300 MB (~1 GB of RSS in the relay),
    and was a 500 for what it could not read."""
    _, body, _ = normalize_chat_body({"query": "Q?", "chat_template": template}, "m", "*/*")
    assert len(body["prompt"]) < 40 and "<class" not in body["prompt"]


def test_a_completion_body_is_relayed_as_sent_but_for_a_default_model():
    assert normalize_completion_body({"prompt": "hi"}, "m") == {"prompt": "hi", "model": "m"}
    assert normalize_completion_body({"prompt": "hi", "model": "own"}, "m")["model"] == "own"
    with pytest.raises(APIError) as error:
        normalize_completion_body(["not", "an", "object"], "m")
    assert error.value.status == 400
