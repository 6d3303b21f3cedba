"""A sequence's text cut where its first stop string begins, whatever pieces it arrives in."""

from __future__ import annotations

import itertools

import pytest

from ovgenai_server.engine.stop_text import StopText

TEXT = " Paris.\n\nThe answer is Paris."


def fed(stops, pieces) -> tuple[str, bool]:
    stop_text = StopText(stops)
    out = "".join(stop_text.feed(piece, index == len(pieces) - 1) for index, piece in enumerate(pieces))
    return out, stop_text.stopped


def splits(text: str, cuts: int):
    for points in itertools.combinations(range(1, len(text)), cuts):
        bounds = (0, *points, len(text))
        yield [text[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize(("stops", "expected"), [
    (["swer"], " Paris.\n\nThe an"),  # ends inside a token: the engine left "The answer"
    (["Paris"], " "),  # begins inside one: the engine dropped the space too
    (["\n\nThe an"], " Paris."),
    (["is ", "."], " Paris"),  # the first to begin wins
    (["nowhere"], TEXT),
    (["r"], " Pa"),
])
def test_cut_where_the_first_stop_begins_in_every_split(stops, expected):
    for cuts in (0, 1, 2):
        for pieces in splits(TEXT, cuts):
            assert fed(stops, pieces) == (expected, expected != TEXT), pieces


def test_nothing_that_could_begin_a_stop_is_sent_before_it_is_known():
    stop_text = StopText(["The end"])  # 6 characters held back: one less than the stop string
    assert stop_text.feed("Once upon a time. The", False) == "Once upon a tim"
    assert stop_text.feed(" e", False) == "e."
    assert stop_text.feed("nd", False) == " "
    assert stop_text.stopped and stop_text.feed(" more", True) == ""


def test_a_final_piece_releases_what_was_held():
    stop_text = StopText(["The end"])
    assert stop_text.feed("It was The e", False) == "It was"
    assert stop_text.feed("xit", True) == " The exit"


def test_the_stop_string_it_ended_at_is_named():
    for stops, matched in ((["is ", "."], "."), (["nowhere"], None), (["Paris", "is"], "Paris")):
        stop_text = StopText(stops)
        stop_text.feed(TEXT, True)
        assert stop_text.matched == matched
