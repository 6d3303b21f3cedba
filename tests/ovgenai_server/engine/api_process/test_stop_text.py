"""A sequence's text cut where its first stop string begins, whatever pieces it arrives in."""

from __future__ import annotations

import itertools
import random

import pytest

from ovgenai_server.engine.api_process.stop_text import StopText

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
    stop_text = StopText(["The end"])  # "The" may begin it: held back
    assert stop_text.feed("Once upon a time. The", False) == "Once upon a time. "
    assert stop_text.feed(" e", False) == ""
    assert stop_text.feed("nd", False) == ""
    assert stop_text.stopped and stop_text.feed(" more", True) == ""


def test_text_no_stop_string_begins_with_is_sent_at_once():
    """Only the end of the text that a stop string begins with waits, not a stop string's length of it: a stream
    with a long stop string lagged its length behind the engine."""
    stop_text = StopText(["\n\n### Unfinished business ###", "Observation:"])
    assert stop_text.feed("The lighthouse stands", False) == "The lighthouse stands"
    assert stop_text.feed(" tall.\n", False) == " tall."
    assert stop_text.feed("\n#", False) == ""
    assert stop_text.feed("# Obs", False) == "\n\n## "  # no longer the first; "Obs" may begin the second
    assert stop_text.feed("ervation:", False) == "" and stop_text.matched == "Observation:"


def test_a_final_piece_releases_what_was_held():
    stop_text = StopText(["The end"])
    assert stop_text.feed("It was The e", False) == "It was "
    assert stop_text.feed("xit", True) == "The exit"


def test_the_stop_string_it_ended_at_is_named():
    for stops, matched in ((["is ", "."], "."), (["nowhere"], None), (["Paris", "is"], "Paris")):
        stop_text = StopText(stops)
        stop_text.feed(TEXT, True)
        assert stop_text.matched == matched


def test_random_texts_stops_and_pieces():
    """Over a small alphabet stop strings overlap themselves and each other ("aab" in "aaab"), where holding back only
    what a stop string begins with could go wrong. After each piece, what is held is exactly the longest end of the
    text that a stop string begins with; the text ends where the stop string found first begins."""
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choices("ab \n", k=rng.randint(0, 14)))
        stops = ["".join(rng.choices("ab \n", k=rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        cuts = sorted(rng.sample(range(1, len(text)), min(rng.randint(0, 4), max(0, len(text) - 1))))
        pieces = [text[a:b] for a, b in itertools.pairwise((0, *cuts, len(text)))]
        stop_text, fed, sent = StopText(stops), "", ""
        for index, piece in enumerate(pieces):
            final = index == len(pieces) - 1
            searched, fed = len(fed), fed + piece
            sent += stop_text.feed(piece, final)
            case = (text, stops, pieces)
            assert fed.startswith(sent), case
            if stop_text.stopped:
                assert fed[len(sent):].startswith(stop_text.matched), case
                assert not any(stop in fed[:searched] for stop in stops), case  # none was complete before
                break
            assert not any(stop in fed for stop in stops), case
            held = fed[len(sent):]
            could_begin = [n for n in range(1, len(fed) + 1) for stop in stops if stop.startswith(fed[-n:])]
            assert len(held) == (0 if final else max(could_begin, default=0)), case


def test_no_stop_string_counts_until_armed():
    """Before a request's min_tokens the text goes out whole and no stop string ends it."""
    stop_text = StopText([" "])
    assert stop_text.feed("Hello! I", False, armed=False) == "Hello! I"
    assert stop_text.feed("'m here", False) == "'m" and stop_text.matched == " "
