"""OPEA's prompt template, filled in one pass, its size bounded before it is built."""

from __future__ import annotations

import pytest

from ovgenai_common.errors import APIError
from ovgenai_common.opea import fill_template, filled_length

LIMIT = 1 << 20


def test_both_placeholders_are_filled():
    assert fill_template("{context}|{question}|{question}", "Q?", "C", max_chars=LIMIT) == "C|Q?|Q?"


def test_nothing_else_in_the_template_is_read():
    template = "{question.__class__} {question:>9} {nope} {{question}} {"
    assert fill_template(template, "Q", max_chars=LIMIT) == "{question.__class__} {question:>9} {nope} {Q} {"


def test_what_is_filled_in_is_not_read_as_a_placeholder():
    """The gateway replaced {context} first, so a retrieved chunk that said "{question}" became the question."""
    filled = fill_template("{context} / {question}", "Q", "a chunk saying {question}", max_chars=LIMIT)
    assert filled == "a chunk saying {question} / Q"


def test_the_filled_size_is_counted_before_anything_is_built():
    template = "{question}" * 10_000 + " {context} {nope}"
    values = {"question": "q" * 100_000, "context": "c" * 7}
    assert filled_length(template, values) == 10_000 * 100_000 + len(" ccccccc {nope}")
    with pytest.raises(APIError) as refused:  # 1 GB, refused without building it
        fill_template(template, values["question"], values["context"], max_chars=LIMIT)
    assert refused.value.status == 400 and refused.value.param == "chat_template"
    assert refused.value.code == "chat_template_too_large"
    assert f"{filled_length(template, values)} characters" in refused.value.message


def test_a_template_filled_exactly_to_the_bound_is_taken():
    assert len(fill_template("<{question}>", "q" * 8, max_chars=10)) == 10
    with pytest.raises(APIError):
        fill_template("<{question}>", "q" * 9, max_chars=10)
