"""Tags in text that arrives in pieces (tools/tags.py): how much of a piece's end could begin a tag, held back until the
next piece says."""

from __future__ import annotations

import pytest

from ovgenai_server.tools.tags import held_prefix


@pytest.mark.parametrize(("text", "held"), [
    ("answer <", 1), ("answer </th", 4), ("answer </think", 7), ("</think", 7), ("<", 1),
    ("answer", 0), ("a < b", 0), ("", 0), ("</think>", 0),  # the whole tag is found, not held
    ("<<", 1),  # only the last "<" could begin it
])
def test_what_could_begin_the_tag_is_held(text, held):
    assert held_prefix(text, "</think>") == held


def test_a_tag_of_one_character_is_never_held():
    assert held_prefix("x[", "[") == 0
