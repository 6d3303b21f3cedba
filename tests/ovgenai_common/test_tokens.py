"""Token-id checks, on the real tokenizers of the default models and at the edges of int64."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import APIError
from ovgenai_common.tokens import check_token_ids, vocabulary_size


def test_vocabulary_unknown_when_the_tokenizer_cannot_say():
    class Broken:
        def get_vocab(self):
            raise UnicodeDecodeError("utf-8", b"\xa1", 0, 1, "invalid start byte")

    assert vocabulary_size(Broken()) is None


@pytest.mark.parametrize(("ids", "vocabulary"), [([0, 9], 10), ([2**63 - 1], None)])
def test_ids_inside_pass(ids, vocabulary):
    check_token_ids(ids, vocabulary, "prompt")


@pytest.mark.parametrize(("ids", "vocabulary"), [([10], 10), ([-1], 10), ([2**63], None), ([-(2**70)], None)])
def test_ids_outside_are_400_naming_the_parameter(ids, vocabulary):
    with pytest.raises(APIError) as error:
        check_token_ids(ids, vocabulary, "input")
    assert error.value.status == 400 and error.value.param == "input"
    assert "outside the model's vocabulary" in error.value.message and len(error.value.message) < 120
