"""Instructions: a request's prompt chosen by name (TEI's prompt_name) or by what its texts are (input_type, as
sentence-transformers' encode_query and encode_document choose), the default one otherwise, the operator's added over
the model's, and a name the model does not have refused with its prompts listed."""

from __future__ import annotations

from typing import get_args

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.embedding.prompts import INPUT_TYPES, Prompts, prompted
from ovgenai_services.embedding.protocol import InputType

E5 = Prompts({"query": "query: ", "passage": "passage: ", "sts": "sts: "})


@pytest.mark.parametrize(("prompt_name", "input_type", "prompt"), [
    ("sts", None, "sts: "), (None, "query", "query: "), (None, "search_query", "query: "),
    (None, "document", "passage: "), (None, "passage", "passage: "), (None, "search_document", "passage: "),
    (None, None, ""),
])
def test_a_prompt_by_name_or_by_input_type(prompt_name, input_type, prompt):
    assert E5.choose(prompt_name, input_type) == prompt


def test_every_input_type_a_request_may_name_chooses_prompts():
    assert set(get_args(InputType)) == set(INPUT_TYPES)


def test_document_takes_the_first_of_document_passage_and_corpus_and_a_model_without_any_none():
    assert Prompts({"corpus": "c: ", "passage": "p: "}).choose(None, "document") == "p: "
    assert Prompts({"corpus": "c: "}).choose(None, "passage") == "c: "
    assert Prompts({"query": "q: "}).choose(None, "document") == ""  # a symmetric side: the text alone
    assert Prompts().choose(None, "query") == ""


def test_the_default_prompt_is_for_a_request_that_chooses_none():
    with_default = Prompts({"query": "q: ", "classification": "c: "}, "classification")
    assert with_default.choose(None, None) == "c: " and with_default.choose(None, "query") == "q: "
    assert with_default.choose(None, "document") == ""  # input_type chooses: never the default


@pytest.mark.parametrize(("prompts", "listed"), [(E5, "'passage', 'query', 'sts'"), (Prompts(), "none")])
def test_an_unknown_prompt_name_is_a_400_listing_the_model_s_prompts(prompts, listed):
    with pytest.raises(APIError, match=f"Unknown prompt_name 'retrieval'; this model's prompts are: {listed}") as no:
        prompts.choose("retrieval", None)
    assert no.value.param == "prompt_name" and no.value.kind is ErrorKind.INVALID_REQUEST


def test_a_prompt_name_and_an_input_type_together_are_refused():
    with pytest.raises(APIError, match="not both") as refused:
        E5.choose("sts", "query")
    assert refused.value.param == "prompt_name"


def test_the_operator_s_prompts_are_added_over_the_model_s_and_its_default_must_be_one_of_them():
    operated = E5.over({"query": "Represent this question: ", "code": "code: "}, "code")
    assert operated.texts == {"query": "Represent this question: ", "passage": "passage: ", "sts": "sts: ",
                              "code": "code: "}
    assert operated.default_name == "code" and E5.over({}, None) == E5
    assert Prompts({"a": "a: "}, "a").over({}, None).default_name == "a"  # the model's default kept
    with pytest.raises(ValueError, match=r"The default prompt 'nope' is not one of the prompts \('passage'"):
        E5.over({}, "nope")


def test_the_prompt_is_put_before_each_text():
    assert prompted("query: ", ["a", "b c"]) == ["query: a", "query: b c"]
    texts = ["a"]
    assert prompted("", texts) is texts
