"""The grounding check the gateway's system tests rely on must be able to fail."""

from tests.gateway.facts import documents, grounded

QUESTION = "Who discovered zephyrine?"


def test_an_answer_naming_the_context_is_grounded():
    assert grounded("It was Odile Marchetti.", documents()["almanac.txt"], QUESTION)


def test_an_answer_from_elsewhere_or_echoing_the_question_is_not():
    context = documents()["almanac.txt"]
    assert not grounded("Marie Curie discovered it in 1898.", context, QUESTION)
    assert not grounded("Zephyrine was discovered by someone.", context, QUESTION)
    assert not grounded("The records are kept in the town archive.", context, QUESTION)  # filler only
