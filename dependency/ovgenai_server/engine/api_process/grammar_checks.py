"""The API process's side of the grammar checks made before admission: each asked of the engine process, which compiles
it off its step (engine/engine_process/grammar_worker.py); the answer awaited, with a time limit that counts from when
the compile started (a check queued behind others is not refused for their time), and kept for the next request."""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Callable

from ..contract.messages import VERDICTS_KEPT, CheckGrammar, GrammarBusy, GrammarStarted, GrammarVerdict
from ..contract.types import EngineBusy, EngineError, StructuredOutput


class GrammarChecks:
    def __init__(self, send: Callable[[CheckGrammar], None], timeout: float):
        self._send, self._timeout = send, timeout
        self._ids = itertools.count()
        self._pending: dict[int, asyncio.Future[str | None]] = {}
        self._verdicts: OrderedDict[StructuredOutput, str | None] = OrderedDict()

    async def check(self, structured: StructuredOutput) -> str | None:
        """The compiler's refusal, or None; EngineBusy when its queue is full."""
        if structured in self._verdicts:
            self._verdicts.move_to_end(structured)
            return self._verdicts[structured]
        check_id = next(self._ids)
        future = self._pending[check_id] = asyncio.get_running_loop().create_future()
        try:
            self._send(CheckGrammar(check_id, structured))
            verdict = await future
        finally:
            self._pending.pop(check_id, None)
        self._verdicts[structured] = verdict
        while len(self._verdicts) > VERDICTS_KEPT:
            self._verdicts.popitem(last=False)
        return verdict

    def pending(self) -> int:
        """Checks waiting for the engine's verdict."""
        return len(self._pending)

    def answered(self, message: GrammarStarted | GrammarVerdict | GrammarBusy) -> None:
        """The engine process's answer to a check."""
        future = self._pending.get(message.check_id)
        if future is None or future.done():
            return
        if isinstance(message, GrammarVerdict):
            future.set_result(message.refusal)
        elif isinstance(message, GrammarBusy):
            future.set_exception(EngineBusy("Too many grammars are waiting for the compiler; retry later.",
                                            message.retry_after))
        else:  # its compile began: from now on, the time limit
            asyncio.get_running_loop().call_later(self._timeout, self._expire, future)

    def _expire(self, future: asyncio.Future[str | None]) -> None:
        if not future.done():  # the engine goes on compiling it, and refuses it as slow when it ends
            future.set_result(f"The grammar did not compile within {self._timeout:g} s.")

    def fail_all(self, message: str) -> None:
        """The engine process stopped: no check will be answered."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(EngineError(message, retryable=True))
