"""The API process's grammar checks: asked of the engine once per grammar, the answer kept; a full compiler queue is
EngineBusy (a 429 with Retry-After upstream, never a 400); the time limit counts from when the compile starts."""

from __future__ import annotations

import asyncio

import pytest

from ovgenai_server.engine.api_process.grammar_checks import GrammarChecks
from ovgenai_server.engine.contract.messages import CheckGrammar, GrammarBusy, GrammarStarted, GrammarVerdict
from ovgenai_server.engine.contract.types import EngineBusy, EngineError, StructuredOutput
from tests.support.waiting import settle, until

GRAMMAR = StructuredOutput("regex", "[a-z]+")


async def asked(checks: GrammarChecks, sent: list, structured: StructuredOutput = GRAMMAR) -> asyncio.Task:
    """The check, started and sent: the engine's answer is the test's to give."""
    before = len(sent)
    task = asyncio.create_task(checks.check(structured))
    await until(lambda: len(sent) > before)
    return task


async def test_a_verdict_answers_the_check_and_is_kept():
    sent: list[CheckGrammar] = []
    checks = GrammarChecks(sent.append, timeout=10)
    task = await asked(checks, sent)
    assert checks.pending() == 1  # /metrics' grammar_checks_pending
    checks.answered(GrammarVerdict(sent[0].check_id, "Unclosed '['"))
    assert await task == "Unclosed '['" and checks.pending() == 0
    assert await checks.check(GRAMMAR) == "Unclosed '['" and len(sent) == 1  # not asked again


async def test_a_full_queue_is_busy_with_its_wait():
    sent: list[CheckGrammar] = []
    checks = GrammarChecks(sent.append, timeout=10)
    task = await asked(checks, sent)
    checks.answered(GrammarBusy(sent[0].check_id, retry_after=7))
    with pytest.raises(EngineBusy) as busy:
        await task
    assert busy.value.retry_after == 7 and busy.value.retryable


async def test_the_limit_counts_from_the_compile_s_start_not_the_queue():
    sent: list[CheckGrammar] = []
    # A limit so short that any turn of the loop outlasts it: no clock to wait for, either way.
    checks = GrammarChecks(sent.append, timeout=1e-9)
    task = await asked(checks, sent)
    await settle()  # queued behind other grammars for longer than the limit: still waiting
    assert not task.done()
    checks.answered(GrammarStarted(sent[0].check_id))
    assert "did not compile within 1e-09 s" in await task


async def test_checks_fail_retryably_when_the_engine_stops():
    sent: list[CheckGrammar] = []
    checks = GrammarChecks(sent.append, timeout=10)
    task = await asked(checks, sent)
    checks.fail_all("The engine process stopped")
    with pytest.raises(EngineError) as failed:
        await task
    assert failed.value.retryable
