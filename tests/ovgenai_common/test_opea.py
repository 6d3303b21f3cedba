"""OPEA's prompt template, filled in one pass."""

from __future__ import annotations

from ovgenai_common.opea import fill_template


def test_both_placeholders_are_filled():
    assert fill_template("{context}|{question}|{question}", "Q?", "C") == "C|Q?|Q?"


def test_nothing_else_in_the_template_is_read():
    template = "{question.__class__} {question:>9} {nope} {{question}} {"
    assert fill_template(template, "Q") == "{question.__class__} {question:>9} {nope} {Q} {"


def test_what_is_filled_in_is_not_read_as_a_placeholder():
    """The gateway replaced {context} first, so a retrieved chunk that said "{question}" became the question."""
    assert fill_template("{context} / {question}", "Q", "a chunk saying {question}") == "a chunk saying {question} / Q"
