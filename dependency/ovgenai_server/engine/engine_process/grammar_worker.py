"""Grammars compiled off the engine's step, in the engine process, into the compile cache its pipeline reads.

Every grammar the pipeline is given is compiled here first, on worker threads that take only CPU time the engine
leaves idle, while the loop goes on stepping: the loop holds a request whose grammar is not compiled yet (`admits`)
and adds it once it is (`ready`), so a step never compiles and a stream in flight keeps its pace. The API process
asks here too before admission (`check`); the verdict (a refusal, or None) goes back as messages.

Two lanes, each a compiler on a thread of its own: grammars estimated cheap (StructuredOutput.cost, estimated in the
API process by engine/contract/grammar_cost.py) take the small lane, the rest the large one, cheapest first; so a
one-property schema is compiled beside a grammar that takes seconds, not after it. Both compile into the one cache.

Compiled grammars are kept for as long as openvino_genai's compile cache keeps them, which has no bound of its own:
past `cache_size` grammars it is emptied (`evict_if_due`, between steps, when no compile runs and no request waits
for its first sampling)."""

from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ovgenai_common.tokens import vocabulary_size

from ..contract.messages import (
    VERDICTS_KEPT,
    AddRequest,
    CheckGrammar,
    FromEngine,
    GrammarBusy,
    GrammarStarted,
    GrammarVerdict,
)
from ..contract.spec import ModelSpec
from ..contract.types import StructuredOutput
from .grammar_compiler import GrammarCompiler

logger = logging.getLogger(__name__)

MAX_QUEUED = 8  # grammars waiting in a lane; past this a check is answered busy (429 with Retry-After)
# Estimated compile time (ms) up to which a grammar takes the small lane: every schema of OpenAI's and LangChain's
# examples costs under 40 (bench/results.md, 2026-11-28); a string's maxLength of 5 already costs 70.
SMALL_GRAMMAR_MS = 50.0
_NO_VERDICT = object()
_CLOSE = float("-inf")  # sorts before any grammar: a lane stops after the compile it is in


class _Lane:
    """One compiler on a thread of its own, taking its grammars cheapest first (in arrival order among equals)."""

    def __init__(self, name: str, compiler: GrammarCompiler):
        self.name, self.compiler = name, compiler
        self.queue: queue.PriorityQueue[tuple[float, int, StructuredOutput | None]] = queue.PriorityQueue()
        self.compiling = threading.Lock()  # held while it compiles, and by an eviction


class GrammarWorker:
    def __init__(self, tokenizer: Any, vocabulary: int, send: Callable[[FromEngine], None], timeout: float,
                 cache_size: int):
        self._lanes = (_Lane("grammar-compiler-small", GrammarCompiler(tokenizer, vocabulary)),
                       _Lane("grammar-compiler", GrammarCompiler(tokenizer, vocabulary)))
        # Running any request through a pipeline of another vocabulary size makes openvino_genai replace the compile
        # cache it keeps on the tokenizer: how the cache is emptied.
        self._other = GrammarCompiler(tokenizer, vocabulary + 1)
        self._send, self._timeout, self._cache_size = send, timeout, cache_size
        self._verdicts: OrderedDict[StructuredOutput, str | None] = OrderedDict()
        self._compiled: set[StructuredOutput] = set()  # in the pipeline's compile cache now
        self._held: dict[StructuredOutput, list[AddRequest]] = {}
        self._checks: dict[StructuredOutput, list[int]] = {}  # the API's checks waiting for each grammar
        self._queued: dict[StructuredOutput, _Lane] = {}  # queued or compiling, and where
        self._arrivals = itertools.count()
        # The worker's news for the loop thread, which alone sends: (grammar, False, None) when its compile starts,
        # (grammar, True, refusal or None) when it ends.
        self._news: queue.SimpleQueue[tuple[StructuredOutput, bool, str | None]] = queue.SimpleQueue()
        for lane in self._lanes:
            threading.Thread(target=self._work, args=(lane,), name=lane.name, daemon=True).start()

    # ---- the loop's side --------------------------------------------------------------------------------------

    def check(self, command: CheckGrammar) -> None:
        """The API process's check: a verdict at once if known and compiled, else once compiled; busy when full."""
        verdict = self._known(command.structured)
        if verdict is not _NO_VERDICT:
            self._send(GrammarVerdict(command.check_id, verdict))  # type: ignore[arg-type]
        elif self._submit(command.structured):
            self._checks.setdefault(command.structured, []).append(command.check_id)
        else:
            self._send(GrammarBusy(command.check_id, retry_after=max(1, round(self._timeout))))

    def admits(self, command: AddRequest) -> bool:
        """Whether the request may go into the pipeline now (its grammar, if any, is compiled); else it is held
        until `ready` gives it back."""
        structured = command.params.structured_output
        if structured is None or structured in self._compiled:
            return True
        held = self._held.setdefault(structured, [])
        held.append(command)
        if len(held) == 1 and not self._submit(structured, force=True):
            raise AssertionError("a forced submission is never refused")
        return False

    def drop(self, request_id: int) -> bool:
        """A held request aborted: True if it was held here."""
        for structured, held in self._held.items():
            for command in held:
                if command.request_id == request_id:
                    held.remove(command)
                    if not held:
                        del self._held[structured]
                    return True
        return False

    def ready(self) -> list[tuple[AddRequest, str | None]]:
        """The held requests whose grammar has been compiled since the last call, each with the compiler's refusal
        (None: it compiled); the verdicts of waiting checks go to the API process."""
        released: list[tuple[AddRequest, str | None]] = []
        while True:
            try:
                structured, finished, verdict = self._news.get_nowait()
            except queue.Empty:
                return released
            if not finished:  # the API process times a check from here: its limit counts compile time only
                for check_id in self._checks.get(structured, []):
                    self._send(GrammarStarted(check_id))
                continue
            self._queued.pop(structured, None)
            self._remember(structured, verdict)
            for check_id in self._checks.pop(structured, []):
                self._send(GrammarVerdict(check_id, verdict))
            released += [(command, verdict) for command in self._held.pop(structured, [])]

    @property
    def busy(self) -> bool:
        """Grammars are queued or compiling: the loop should look at `ready` soon, even when idle."""
        return bool(self._queued)

    def evict_if_due(self, unsampled: int) -> None:
        """Past `cache_size` compiled grammars, the compile cache emptied, between steps: only while nothing compiles
        and no request in the pipeline waits for its first sampling (`unsampled`), which would compile it again
        inside the step."""
        if len(self._compiled) <= self._cache_size or unsampled or self._queued:
            return
        held = [lane.compiling for lane in self._lanes if lane.compiling.acquire(blocking=False)]
        try:
            if len(held) < len(self._lanes):
                return
            started = time.perf_counter()
            self._other.compile(None)  # the cache replaced by one for another vocabulary size ...
            self._lanes[0].compiler.compile(None)  # ... and by a fresh one for the model's
            logger.info("%d compiled grammars dropped from the compile cache (%.0f ms)", len(self._compiled),
                        (time.perf_counter() - started) * 1000)
            self._compiled.clear()
        finally:
            for lock in held:
                lock.release()

    def close(self) -> None:
        for lane in self._lanes:
            lane.queue.put((_CLOSE, next(self._arrivals), None))

    # ---- helpers ----------------------------------------------------------------------------------------------

    def _known(self, structured: StructuredOutput) -> object:
        verdict = self._verdicts.get(structured, _NO_VERDICT)
        if verdict is None and structured not in self._compiled:
            return _NO_VERDICT  # compiles, but was dropped from the cache: compiled again before any request runs
        if verdict is not _NO_VERDICT:
            self._verdicts.move_to_end(structured)
        return verdict

    def _submit(self, structured: StructuredOutput, force: bool = False) -> bool:
        """Queued on its lane (a cheap grammar on the small one), unless that lane is full and it is not forced."""
        if structured in self._queued:
            return True
        lane = self._lanes[0] if structured.cost <= SMALL_GRAMMAR_MS else self._lanes[1]
        if sum(queued is lane for queued in self._queued.values()) >= MAX_QUEUED and not force:
            return False
        self._queued[structured] = lane
        lane.queue.put((structured.cost, next(self._arrivals), structured))
        return True

    def _remember(self, structured: StructuredOutput, verdict: str | None) -> None:
        self._verdicts[structured] = verdict
        self._verdicts.move_to_end(structured)
        while len(self._verdicts) > VERDICTS_KEPT:
            self._verdicts.popitem(last=False)
        if verdict is None:
            self._compiled.add(structured)

    # ---- the worker -------------------------------------------------------------------------------------------

    def _work(self, lane: _Lane) -> None:
        _run_when_idle()
        while (structured := lane.queue.get()[2]) is not None:
            with lane.compiling:
                self._news.put((structured, False, None))
                started = time.monotonic()
                verdict = lane.compiler.compile(structured)
                if verdict is None and time.monotonic() - started > self._timeout:
                    verdict = f"The grammar did not compile within {self._timeout:g} s."
            self._news.put((structured, True, verdict))


def logits_size(spec: ModelSpec, tokenizer: Any) -> int:
    """The size of the model's logits, which the sampler names the compile cache by: a checker of another size would
    replace the cache instead of filling it. The model's config says it, else its IR's logits output, else the
    tokenizer's vocabulary."""
    try:
        config = json.loads((spec.folder / "config.json").read_text())
        size = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
        if size:
            return int(size)
    except (OSError, ValueError):
        pass
    if spec.path.is_dir() and (spec.path / "openvino_model.xml").is_file():
        import openvino

        for output in openvino.Core().read_model(str(spec.path / "openvino_model.xml")).outputs:
            if "logits" in output.get_names() and output.get_partial_shape()[-1].is_static:
                return output.get_partial_shape()[-1].get_length()
    return vocabulary_size(tokenizer) or len(tokenizer.get_vocab())


def _run_when_idle() -> None:
    """This thread, and the compiler's threads it starts (which inherit it), only when the engine's threads leave a
    core idle: a step waits for its slowest thread, so a core the compiler took would slow every step. Not pinned to
    one core: OpenVINO pins the thread that runs the null model's inference to every core at its first compile, and a
    pin that held (one inference thread, no CPU pinning) compiled 1.7x slower and left the steps as slow as they were
    (bench/results.md, 2026-11-28)."""
    try:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):  # not Linux, or not allowed: at the engine's priority
        pass
