"""Reasoning split from the answer, whole and piece by piece: every split of the text gives the same parts."""

from __future__ import annotations

import pytest

from ovgenai_server.tools.reasoning import ReasoningSplitter, starts_inside


def split(text: str, inside: bool, pieces: list[str] | None = None) -> tuple[str | None, str]:
    splitter = ReasoningSplitter(inside)
    reasoning = answer = ""
    for piece in pieces or [text]:
        r, a = splitter.feed(piece)
        reasoning, answer = reasoning + r, answer + a
    r, a = splitter.finish()
    return (reasoning + r if splitter.reasoned else None), answer + a


def splits(text: str) -> list[list[str]]:
    return [[text], list(text)] + [[text[:cut], text[cut:]] for cut in range(1, len(text))]


@pytest.mark.parametrize(
    ("text", "inside", "expected"),
    [
        ("<think>Two and two.</think>\n\nIt is 4.", False, ("Two and two.", "It is 4.")),  # Qwen3
        ("\n<think>a</think>b", False, ("a", "b")),
        ("Two and two.</think>It is 4.", True, ("Two and two.", "It is 4.")),  # DeepSeek-R1: the prompt opened it
        ("It is 4, <think> is a tag.", False, (None, "It is 4, <think> is a tag.")),  # no reasoning: all answer
        ("<think>still thinking", False, ("still thinking", "")),  # cut short: all reasoning
        ("still thinking</th", True, ("still thinking</th", "")),
        ("<think></think>It is 4.", False, ("", "It is 4.")),
        ("", False, (None, "")),
        ("<thin", False, (None, "<thin")),
    ],
)
def test_reasoning_and_answer_in_every_split(text, inside, expected):
    for pieces in splits(text) if text else [[text]]:
        assert split(text, inside, pieces) == expected, pieces


def test_the_prompt_says_whether_the_reasoning_is_open():
    assert starts_inside("<|im_start|>assistant\n<think>\n")
    assert not starts_inside("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not starts_inside("<|im_start|>assistant\n")
