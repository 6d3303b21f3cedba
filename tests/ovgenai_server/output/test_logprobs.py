"""Log probabilities in OpenAI's two shapes (output/logprobs.py), on the fake tokenizer (token id n is n x's), and the
scores a stream holds back until the text they belong to goes out."""

from __future__ import annotations

from ovgenai_server.engine.contract.types import SequenceDelta
from ovgenai_server.output.logprobs import HeldScores, chat_logprobs, completion_logprobs
from tests.support.fake_engine import FakePrompts


def test_chat_logprobs_are_one_entry_per_token_with_its_bytes():
    assert chat_logprobs(FakePrompts(), [2, 1], [-0.5, -1.5]) == {"content": [
        {"token": "xx", "logprob": -0.5, "bytes": [120, 120], "top_logprobs": []},
        {"token": "x", "logprob": -1.5, "bytes": [120], "top_logprobs": []},
    ]}
    assert chat_logprobs(FakePrompts(), [], []) == {"content": []}


def test_completion_logprobs_are_parallel_lists_with_each_tokens_offset():
    shaped = completion_logprobs(FakePrompts(), [3, 1, 2], [None, -0.25, -2.0])
    assert shaped == {"tokens": ["xxx", "x", "xx"], "token_logprobs": [None, -0.25, -2.0], "top_logprobs": None,
                      "text_offset": [0, 3, 4]}


def test_chat_alternatives_list_the_chosen_token_itself():
    """top_logprobs 1: the engine scores the chosen token only, so it is the one alternative (as OVMS lists it)."""
    entry = {"token": "xx", "logprob": -0.5, "bytes": [120, 120]}
    assert chat_logprobs(FakePrompts(), [2], [-0.5], alternatives=True) == {"content": [
        {**entry, "top_logprobs": [entry]}]}


def test_completion_alternatives_map_each_chosen_token_to_its_own_score():
    """logprobs 1, as lm-evaluation-harness asks: the prompt's first token has no score, so no alternative."""
    shaped = completion_logprobs(FakePrompts(), [3, 1, 2], [None, -0.25, -2.0], alternatives=True)
    assert shaped["top_logprobs"] == [None, {"x": -0.25}, {"xx": -2.0}]
    assert shaped["token_logprobs"] == [None, -0.25, -2.0]


def test_completion_logprobs_never_list_more_scores_than_tokens():
    assert completion_logprobs(FakePrompts(), [1], [-1.0, -2.0])["token_logprobs"] == [-1.0]


def test_held_scores_wait_per_choice_until_taken():
    held = HeldScores()
    held.add(SequenceDelta(0, "", 1, logprobs=[-0.1], token_ids=[5]))
    held.add(SequenceDelta(1, "", 1, logprobs=[-0.7], token_ids=[9]))
    held.add(SequenceDelta(0, "é", 1, logprobs=[-0.2], token_ids=[6]))
    held.add(SequenceDelta(0, "", 0))  # a delta without scores adds nothing
    assert held.take(0) == ([5, 6], [-0.1, -0.2])
    assert held.take(0) == ([], [])  # taken once
    assert held.take(1) == ([9], [-0.7]) and held.take(2) == ([], [])
