"""The grammar service's lanes, with a stand-in compiler the test holds: a cheap grammar is answered beside expensive
ones, not after them; the large lane takes the cheapest grammar first; a full lane does not make the other busy; an
eviction waits until neither lane compiles. No clock: a compile ends when the test lets it."""

from __future__ import annotations

import threading
import time

import pytest

from ovgenai_server.engine.contract.messages import CheckGrammar, GrammarBusy, GrammarStarted, GrammarVerdict
from ovgenai_server.engine.contract.types import StructuredOutput
from ovgenai_server.engine.engine_process import grammar_worker
from ovgenai_server.engine.engine_process.grammar_worker import SMALL_GRAMMAR_MS, GrammarWorker

CHEAP = StructuredOutput("json_schema", '{"type": "object"}', "response_format", 5.0)


def costly(name: str, cost: float) -> StructuredOutput:
    return StructuredOutput("json_schema", name, "tool_choice", cost)


class Compiles:
    """What the stand-in compilers did, and the gates that hold each grammar's compile until the test opens them."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def compiler(self, tokenizer, vocabulary):  # noqa: ARG002 - GrammarCompiler's signature
        compiles = self

        class Held:
            def compile(self, structured: StructuredOutput | None) -> str | None:
                if structured is not None:
                    with compiles.lock:
                        compiles.started.append(structured.value)
                    assert compiles.gate(structured.value).wait(30), f"{structured.value} was never let through"
                return None

        return Held()


@pytest.fixture
def service(monkeypatch):
    compiles = Compiles()
    monkeypatch.setattr(grammar_worker, "GrammarCompiler", compiles.compiler)
    monkeypatch.setattr(grammar_worker, "_run_when_idle", lambda: None)  # a busy test machine must not starve it
    sent: list = []
    worker = GrammarWorker(object(), 100, sent.append, timeout=60, cache_size=1)
    compiles.gate(CHEAP.value).set()
    yield worker, sent, compiles
    for gate in list(compiles.gates.values()):
        gate.set()
    worker.close()


def until(worker: GrammarWorker, condition, deadline: float = 30.0) -> None:
    """The loop's part: news taken (`ready`) until `condition()` holds; the deadline is reached only by a failure."""
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "not reached"
        worker.ready()
        time.sleep(0.001)


def verdicts(sent: list) -> dict[int, str | None]:
    return {message.check_id: message.refusal for message in sent if isinstance(message, GrammarVerdict)}


def test_a_cheap_grammar_after_two_expensive_ones_is_answered_before_either_finishes(service):
    worker, sent, compiles = service
    expensive = [costly("slow one", 1500.0), costly("slow two", 1800.0)]
    for check_id, structured in enumerate([*expensive, CHEAP]):
        worker.check(CheckGrammar(check_id, structured))
    until(worker, lambda: 2 in verdicts(sent))
    assert verdicts(sent) == {2: None}  # both expensive ones still compiling or waiting: held by the test
    assert CHEAP.value in compiles.started and "slow two" not in compiles.started
    for structured in expensive:
        compiles.gate(structured.value).set()
    until(worker, lambda: len(verdicts(sent)) == 3)
    assert sent.index(GrammarStarted(0)) < sent.index(GrammarVerdict(0, None))  # the limit still counts from here


def test_the_large_lane_takes_the_cheapest_grammar_first(service):
    worker, sent, compiles = service
    worker.check(CheckGrammar(0, costly("first", 3000.0)))
    until(worker, lambda: compiles.started == ["first"])  # compiling: the others queue behind it
    for check_id, (name, cost) in enumerate([("dear", 1900.0), ("cheaper", 400.0), ("middling", 900.0)], 1):
        worker.check(CheckGrammar(check_id, costly(name, cost)))
        compiles.gate(name).set()
    compiles.gate("first").set()
    until(worker, lambda: len(verdicts(sent)) == 4)
    assert compiles.started == ["first", "cheaper", "middling", "dear"]


def test_a_full_large_lane_is_busy_while_a_cheap_grammar_is_still_taken(service, monkeypatch):
    monkeypatch.setattr(grammar_worker, "MAX_QUEUED", 1)
    worker, sent, _ = service
    worker.check(CheckGrammar(0, costly("slow", 1000.0)))
    worker.check(CheckGrammar(1, costly("slower", 1200.0)))
    worker.check(CheckGrammar(2, CHEAP))
    assert GrammarBusy(1, retry_after=60) in sent
    until(worker, lambda: 2 in verdicts(sent))
    assert CHEAP.cost <= SMALL_GRAMMAR_MS < 1000.0


def test_the_cache_is_not_emptied_while_either_lane_compiles(service):
    worker, sent, compiles = service
    worker.check(CheckGrammar(0, CHEAP))
    worker.check(CheckGrammar(1, costly("kept", 700.0)))
    compiles.gate("kept").set()
    until(worker, lambda: len(verdicts(sent)) == 2)
    worker.check(CheckGrammar(2, costly("slow", 800.0)))  # a third grammar compiling: past the cache's size of 1
    until(worker, lambda: "slow" in compiles.started)
    worker.evict_if_due(unsampled=0)
    assert len(worker._compiled) == 2  # not while a lane compiles
    compiles.gate("slow").set()
    until(worker, lambda: not worker.busy)
    worker.evict_if_due(unsampled=0)
    assert not worker._compiled
