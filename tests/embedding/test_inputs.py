"""A request's checks: texts or token ids and how many, each a 400 naming the request's own field; fields the
service does not know; the dimensions asked for (only a Matryoshka model's vectors are cut); vLLM's
truncate_prompt_tokens; TEI's normalize; each text's tokens against the model's limit; rerank's documents; and which
inputs are small enough to check on the event loop."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_services.embedding.inputs import SMALL_INPUT_ITEMS, InputRules, non_empty, small_input
from ovgenai_services.embedding.protocol import EmbeddingRequest, RerankRequest

RULES = InputRules("m", max_inputs=3, max_tokens=8, dimensions=2, vocabulary=100, normalized=True)


@pytest.mark.parametrize(("value", "inputs"), [
    ("a", (["a"], [])), (["a", "b"], (["a", "b"], [])), ([1, 2], ([], [[1, 2]])), ([[1], [2, 3]], ([], [[1], [2, 3]])),
])
def test_texts_or_token_ids(value, inputs):
    assert RULES.inputs_of(value) == inputs


@pytest.mark.parametrize(("value", "message"), [
    ([], "'inputs' must not be an empty list"), ([[1], []], "Token-id inputs must be non-empty"),
    ([[1], ["a"]], "Token-id inputs"), (5, "must be a string, a list of strings, or token ids"),
    (["a", 1], "must be a string"), (["a"] * 4, r"Too many inputs: 4 \(at most 3"),
    ([[1], [2], [3], [4]], "Too many inputs"), ([7, 100], "Token id 100"),
])
def test_bad_inputs_are_400_naming_the_request_s_field(value, message):
    with pytest.raises(APIError, match=message) as refused:
        RULES.inputs_of(value, "inputs")
    assert refused.value.kind is ErrorKind.INVALID_REQUEST and refused.value.param == "inputs"


def test_every_text_has_text():
    assert non_empty(["a", " b "]) == ["a", " b "]
    with pytest.raises(APIError, match="Input 1 is empty") as refused:
        non_empty(["a", " \n"], "inputs")
    assert refused.value.param == "inputs"


def test_which_inputs_are_small_enough_to_check_on_the_loop():
    many = SMALL_INPUT_ITEMS + 1
    assert small_input("a query") and small_input(["a"] * SMALL_INPUT_ITEMS) and small_input([[1, 2], [3]])
    assert not small_input(["a"] * many) and not small_input([[1] * many]) and not small_input([1] * many)


def test_fields_the_service_does_not_know_are_refused_by_name():
    RULES.check_options(EmbeddingRequest(input="a", dimensions=2, truncate_prompt_tokens=-1, input_type="query"))
    with pytest.raises(APIError, match="Unsupported parameter") as unknown:
        RULES.check_options(EmbeddingRequest(input="a", best_of=2, zeta=1))
    assert unknown.value.param == "best_of"


MATRYOSHKA = InputRules("mrl", 3, 8, dimensions=768, vocabulary=100, normalized=True, matryoshka=True)


@pytest.mark.parametrize(("rules", "dimensions", "size"), [
    (RULES, None, None), (RULES, 2, None),  # the model's own size: nothing to cut, whatever the model
    (MATRYOSHKA, 64, 64), (MATRYOSHKA, 767, 767), (MATRYOSHKA, 768, None),
    (replace(MATRYOSHKA, matryoshka_dimensions=(256, 512)), 256, 256),
])
def test_the_size_vectors_are_cut_to(rules, dimensions, size):
    assert rules.shortened_to(dimensions) == size


@pytest.mark.parametrize(("rules", "dimensions", "message"), [
    (RULES, 1, "Model 'm' is not a Matryoshka model: its vectors cannot be cut to fewer than their 2 dimensions"),
    (MATRYOSHKA, 769, "Model 'mrl' gives vectors of 768 dimensions; 'dimensions' cannot ask for more"),
    (replace(MATRYOSHKA, matryoshka_dimensions=(256, 512)), 300, "gives vectors of 256, 512, 768 dimensions, not 300"),
])
def test_dimensions_a_model_cannot_give_are_refused_naming_it(rules, dimensions, message):
    with pytest.raises(APIError, match=message) as refused:
        rules.shortened_to(dimensions)
    assert refused.value.param == "dimensions" and refused.value.kind is ErrorKind.INVALID_REQUEST


def test_truncate_prompt_tokens_is_the_tokens_each_text_is_cut_to_as_vllm_takes_it():
    assert (RULES.cut_of(None), RULES.cut_of(-1), RULES.cut_of(1), RULES.cut_of(8)) == (None, 8, 1, 8)
    for value, message in ((0, "must be -1 .* or at least 1"), (9, "is 9; this model accepts at most 8 tokens")):
        with pytest.raises(APIError, match=message) as refused:
            RULES.cut_of(value)
        assert refused.value.param == "truncate_prompt_tokens"


def test_tei_normalize_is_done_here_only_for_a_model_that_does_not_and_false_is_refused_where_it_does():
    raw = InputRules("m", 3, 8, 2, 100, normalized=False)
    assert (raw.normalizes(True), raw.normalizes(None), raw.normalizes(False)) == (True, False, False)
    assert (RULES.normalizes(True), RULES.normalizes(None)) == (False, False)
    with pytest.raises(APIError, match="returns normalized vectors") as refused:
        RULES.normalizes(False)
    assert refused.value.param == "normalize"


def test_a_text_over_the_model_s_limit_is_truncated_or_refused_by_its_index_and_tokens():
    assert RULES.embedded_tokens([3, 20, 8], truncate=True) == [3, 8, 8]
    assert RULES.embedded_tokens([3, 20, 8], truncate=True, cut=4) == [3, 4, 4]  # a request's own cut
    assert RULES.embedded_tokens([3, 8], truncate=False) == [3, 8]
    with pytest.raises(APIError, match="Input 1 has 20 tokens; this model accepts at most 8") as refused:
        RULES.embedded_tokens([3, 20, 30, 0], truncate=False, field="inputs")  # zeros: not counted, refused first
    assert refused.value.param == "inputs"


def test_rerank_documents_are_required_present_and_bounded():
    assert RULES.documents(RerankRequest(query="q", texts=["a"])) == ["a"]  # TEI's name for them
    assert RULES.documents(RerankRequest(query="q", documents=["b"], texts=["a"])) == ["b"]
    with pytest.raises(APIError, match="'documents' is required"):
        RULES.documents(RerankRequest(query="q"))
    RULES.check_documents(["a"] * 3)
    for documents, message in (([], "must not be empty"), (["a"] * 4, r"Too many documents: 4 \(at most 3")):
        with pytest.raises(APIError, match=message) as refused:
            RULES.check_documents(documents)
        assert refused.value.param == "documents"
