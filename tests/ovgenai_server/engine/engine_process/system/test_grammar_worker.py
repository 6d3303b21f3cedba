"""The engine process's grammar service on the default model's tokenizer: checks answered after the compile started,
requests held until their grammar is compiled, a full queue answered busy, a slow grammar refused and remembered,
the compile cache emptied past its size, and every thread that compiles taking only CPU the engine leaves idle."""

from __future__ import annotations

import os
import threading
import time

import pytest

from ovgenai_server.engine.contract.messages import (
    AddRequest,
    CheckGrammar,
    GrammarBusy,
    GrammarStarted,
    GrammarVerdict,
)
from ovgenai_server.engine.contract.types import GenerationParams, StructuredOutput, TokenPrompt
from ovgenai_server.engine.engine_process import grammar_worker as grammars_module
from ovgenai_server.engine.engine_process.grammar_worker import GrammarWorker
from tests.support.servers import MODELS

GOOD = StructuredOutput("regex", "[a-z]+")
BAD = StructuredOutput("regex", "(unbalanced")


@pytest.fixture(scope="module")
def tokenizer(default_model):
    import openvino_genai

    return openvino_genai.Tokenizer(str(MODELS / default_model))


def service(tokenizer, **options) -> tuple[GrammarWorker, list]:
    sent: list = []
    made = GrammarWorker(tokenizer, 49152, sent.append, options.get("timeout", 60), options.get("cache_size", 8))
    return made, sent


def settled(grammars: GrammarWorker, deadline: float = 60.0) -> list:
    """Every held request released once nothing is left to compile."""
    released, end = [], time.monotonic() + deadline
    while time.monotonic() < end:
        released += grammars.ready()
        if not grammars.busy:
            return released + grammars.ready()
        time.sleep(0.01)
    raise AssertionError("the grammars did not compile in time")


def test_a_check_is_answered_after_its_compile_started(tokenizer):
    grammars, sent = service(tokenizer)
    try:
        grammars.check(CheckGrammar(1, GOOD))
        grammars.check(CheckGrammar(2, BAD))
        settled(grammars)
        assert sent.index(GrammarStarted(1)) < sent.index(GrammarVerdict(1, None))
        verdicts = {m.check_id: m.refusal for m in sent if isinstance(m, GrammarVerdict)}
        assert verdicts[1] is None and verdicts[2]  # the compiler's reason
        assert sent.index(GrammarStarted(2)) < sent.index(GrammarVerdict(2, verdicts[2]))
        grammars.check(CheckGrammar(3, GOOD))  # known and compiled: answered at once
        assert sent[-1] == GrammarVerdict(3, None)
    finally:
        grammars.close()


def test_a_request_waits_for_its_grammar_and_a_refused_one_comes_back_with_the_reason(tokenizer):
    grammars, _ = service(tokenizer)
    try:
        held = AddRequest(7, TokenPrompt([1]), GenerationParams(max_new_tokens=2, structured_output=GOOD))
        refused = AddRequest(8, TokenPrompt([1]), GenerationParams(max_new_tokens=2, structured_output=BAD))
        plain = AddRequest(9, TokenPrompt([1]), GenerationParams(max_new_tokens=2))
        assert grammars.admits(plain) and not grammars.admits(held) and not grammars.admits(refused)
        released = dict((command.request_id, verdict) for command, verdict in settled(grammars))
        assert released[7] is None and released[8]
        assert grammars.admits(held)  # compiled now: in at once
    finally:
        grammars.close()


def test_a_full_queue_is_answered_busy_and_a_held_request_still_compiles(tokenizer, monkeypatch):
    monkeypatch.setattr(grammars_module, "MAX_QUEUED", 1)
    grammars, sent = service(tokenizer)
    try:
        grammars.check(CheckGrammar(1, StructuredOutput("regex", "[a-c]+")))
        grammars.check(CheckGrammar(2, StructuredOutput("regex", "[d-f]+")))
        assert GrammarBusy(2, retry_after=60) in sent
        assert not grammars.admits(AddRequest(3, TokenPrompt([1]), GenerationParams(
            max_new_tokens=2, structured_output=StructuredOutput("regex", "[g-i]+"))))
        assert [command.request_id for command, _ in settled(grammars)] == [3]
    finally:
        grammars.close()


def test_a_grammar_slower_than_the_limit_is_refused_and_remembered(tokenizer):
    grammars, sent = service(tokenizer, timeout=1e-9)
    try:
        grammars.check(CheckGrammar(1, GOOD))
        settled(grammars)
        grammars.check(CheckGrammar(2, GOOD))
        refusals = [m.refusal for m in sent if isinstance(m, GrammarVerdict)]
        assert len(refusals) == 2 and all("did not compile within" in r for r in refusals)
    finally:
        grammars.close()


def test_past_its_size_the_compile_cache_is_emptied_and_a_grammar_compiles_again(tokenizer):
    grammars, sent = service(tokenizer, cache_size=1)
    try:
        for check_id, letters in enumerate(("[a-c]+", "[d-f]+")):
            grammars.check(CheckGrammar(check_id, StructuredOutput("regex", letters)))
        settled(grammars)
        grammars.evict_if_due(unsampled=1)  # a request waits for its first sampling: not now
        assert len(grammars._compiled) == 2
        grammars.evict_if_due(unsampled=0)
        assert not grammars._compiled
        grammars.check(CheckGrammar(9, StructuredOutput("regex", "[a-c]+")))
        settled(grammars)
        assert GrammarStarted(9) in sent  # compiled again, off the step, before any request of it runs
    finally:
        grammars.close()


def _threads() -> dict[int, tuple[int, int]]:
    """Each thread of this process: its CPU time so far (clock ticks) and its scheduling policy."""
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # from the 3rd field on: utime, stime are 14th, 15th
            found[int(tid)] = (int(fields[11]) + int(fields[12]), os.sched_getscheduler(int(tid)))
        except OSError:  # ended meanwhile
            continue
    return found


def test_every_thread_that_compiles_takes_only_idle_cpu(tokenizer):
    """A step waits for its slowest thread: the compile must run only where the engine leaves a core idle. The lanes'
    threads are SCHED_IDLE, and so is every thread xgrammar starts for a compile (they inherit it): whatever took CPU
    time while a grammar compiled, but the test's own thread, was SCHED_IDLE all along."""
    grammars, sent = service(tokenizer)
    slow = StructuredOutput("regex", "".join(f"[a-{chr(ord('b') + i % 20)}]" for i in range(6000)), cost=2000.0)
    first: dict[int, int] = {}
    used: dict[int, int] = {}
    policies: dict[int, set[int]] = {}
    try:
        grammars.check(CheckGrammar(1, slow))
        while not any(isinstance(message, GrammarVerdict) for message in sent):
            for tid, (ticks, policy) in _threads().items():
                used[tid] = ticks - first.setdefault(tid, ticks)
                policies.setdefault(tid, set()).add(policy)
            grammars.ready()
            time.sleep(0.005)
    finally:
        grammars.close()
    compiling = {tid: policies[tid] for tid, ticks in used.items() if ticks and tid != threading.get_native_id()}
    assert compiling, "no thread was seen compiling"
    assert all(seen == {os.SCHED_IDLE} for seen in compiling.values()), compiling
