"""A request's checks: texts or token ids and how many, each a 400 naming the request's own field; OpenAI's options
the service cannot honour; TEI's normalize; each text's tokens against the model's limit; rerank's documents; and
which inputs are small enough to check on the event loop."""

from __future__ import annotations

import pytest

from microservices.embedding.inputs import SMALL_INPUT_ITEMS, InputRules, non_empty, small_input
from microservices.embedding.protocol import EmbeddingRequest, RerankRequest
from ovgenai_common.errors import APIError, ErrorKind

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


def test_openai_options_the_service_cannot_honour():
    RULES.check_options(EmbeddingRequest(input="a", dimensions=2))
    with pytest.raises(APIError, match="Unsupported parameter") as unknown:
        RULES.check_options(EmbeddingRequest(input="a", best_of=2, zeta=1))
    with pytest.raises(APIError, match="other than its native 2") as dimensions:
        RULES.check_options(EmbeddingRequest(input="a", dimensions=3))
    assert (unknown.value.param, dimensions.value.param) == ("best_of", "dimensions")


def test_tei_normalize_is_done_here_only_for_a_model_that_does_not_and_false_is_refused_where_it_does():
    raw = InputRules("m", 3, 8, 2, 100, normalized=False)
    assert (raw.normalizes(True), raw.normalizes(None), raw.normalizes(False)) == (True, False, False)
    assert (RULES.normalizes(True), RULES.normalizes(None)) == (False, False)
    with pytest.raises(APIError, match="returns normalized vectors") as refused:
        RULES.normalizes(False)
    assert refused.value.param == "normalize"


def test_a_text_over_the_model_s_limit_is_truncated_or_refused_by_its_index_and_tokens():
    assert RULES.embedded_tokens([3, 20, 8], truncate=True) == [3, 8, 8]
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
