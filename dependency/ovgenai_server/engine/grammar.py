"""Structured-output grammars compiled before admission, by the same compiler the engine would run them with.

openvino_genai compiles a request's grammar (xgrammar) inside `ContinuousBatchingPipeline.step()`, the first time
the request is sampled. A grammar it refuses (`{"type": "nonsense"}`, a regex that does not parse, a minimum above
its maximum...) then throws out of the step, and a pipeline whose step has thrown is left unusable (every later
step fails): one request would stop the model for everyone. So the API process compiles every grammar first.

There is no public "compile this grammar" call, so the checker is a real `LLMPipeline` built around a model that
computes nothing (its logits are constants of the served model's vocabulary size) and the served model's own
tokenizer: generating with the request's structured-output configuration makes openvino_genai build the grammar
exactly as the engine would, and raise what the engine would raise. It costs no weights and compiles in well under a
second.

A grammar can also compile and match no text at all (a JSON schema whose `$ref` refers only to itself, an EBNF rule
with no base case): the engine then masks every token and samples garbage (greedy: token 0, for ever). The null
model's logits rank token 0 last, so its greedy choice is token 0 only when the grammar allows no other token; two
such choices in a row are such a grammar.

Compilation runs on a thread of its own (the call releases the GIL) with a time limit, so a pathological grammar
can delay only other grammar checks, never the event loop or the engine.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ovgenai_common.errors import library_reason

from .types import StructuredOutput

logger = logging.getLogger(__name__)

NO_TOKEN_LOGIT = -1e4
VERDICTS_KEPT = 512  # recent grammars and their verdicts: a client repeating one schema pays for it once
MAX_PENDING = 32  # grammars waiting for the compiler; past this a check is refused rather than queued


class GrammarError(Exception):
    """The grammar cannot be used: the message says why, in the compiler's words (without its source paths)."""


def _null_model(vocabulary: int) -> Any:
    """An LLM-shaped OpenVINO model whose next-token logits are all zero: the pipeline runs it, nothing is computed."""
    import numpy as np
    import openvino
    from openvino import opset13 as ops

    inputs = {
        "input_ids": ops.parameter([-1, -1], openvino.Type.i64),
        "attention_mask": ops.parameter([-1, -1], openvino.Type.i64),
        "position_ids": ops.parameter([-1, -1], openvino.Type.i64),
        "beam_idx": ops.parameter([-1], openvino.Type.i32),
    }
    for name, parameter in inputs.items():
        parameter.output(0).set_names({name})
    shape = ops.concat([ops.shape_of(inputs["input_ids"]), ops.constant(np.array([vocabulary], np.int64))], 0)
    row = np.zeros(vocabulary, np.float32)
    row[0] = NO_TOKEN_LOGIT  # last of all tokens: chosen only when the grammar masks every token
    logits = ops.broadcast(ops.constant(row), shape)
    logits.output(0).set_names({"logits"})
    return openvino.Model([ops.result(logits)], list(inputs.values()), "grammar_checker")


def structured_output_config(structured: StructuredOutput) -> Any:
    import openvino_genai

    return openvino_genai.StructuredOutputConfig(**{structured.kind: structured.value})


class GrammarChecker:
    def __init__(self, tokenizer: Any, vocabulary: int, timeout: float):
        import numpy
        import openvino
        import openvino_genai

        self.timeout = timeout
        folder = Path(tempfile.mkdtemp(prefix="ovgenai-grammar-"))
        try:
            openvino.save_model(_null_model(vocabulary), str(folder / "openvino_model.xml"))
            self._pipeline = openvino_genai.LLMPipeline(str(folder), tokenizer, "CPU", ATTENTION_BACKEND="SDPA")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._prompt = openvino.Tensor(numpy.zeros((1, 1), dtype=numpy.int64))
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="grammar")
        self._verdicts: OrderedDict[StructuredOutput, str | None] = OrderedDict()
        self._pending = 0

    def _compile(self, structured: StructuredOutput) -> str | None:
        """The compiler's refusal, or None; a grammar slower than the time limit counts as refused (the engine would
        stall every request in its batch for as long)."""
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = 2
        started = time.monotonic()
        try:
            config.structured_output_config = structured_output_config(structured)
            config.validate()
            result = self._pipeline.generate(self._prompt, config)
        except Exception as error:
            return library_reason(error)
        if time.monotonic() - started > self.timeout:
            return f"The grammar did not compile within {self.timeout:g} s."
        if list(result.tokens[0]) == [0, 0]:
            return ("No text satisfies it (for example, a $ref that refers only to itself, or a rule with no "
                    "base case).")
        return None

    async def check(self, structured: StructuredOutput) -> None:
        """Returns when the grammar compiles; raises GrammarError with the reason when it does not (or not in time)."""
        if structured in self._verdicts:
            self._verdicts.move_to_end(structured)
            verdict = self._verdicts[structured]
        else:
            if self._pending >= MAX_PENDING:
                raise GrammarError("Too many grammars are being compiled; retry later.")
            self._pending += 1
            work = asyncio.get_running_loop().run_in_executor(self._executor, self._compile, structured)
            # The compiler cannot be interrupted: a grammar that runs past the time limit finishes in the background,
            # and its verdict is kept (a slow one as refused), so the same grammar is answered at once next time.
            work.add_done_callback(lambda done: self._finished(structured, done))
            try:
                verdict = await asyncio.wait_for(asyncio.shield(work), self.timeout)
            except TimeoutError:
                raise GrammarError(f"The grammar did not compile within {self.timeout:g} s.") from None
        if verdict is not None:
            raise GrammarError(verdict)

    def _finished(self, structured: StructuredOutput, done: asyncio.Future) -> None:
        self._pending -= 1
        if done.cancelled():
            return
        self._verdicts[structured] = done.result()
        while len(self._verdicts) > VERDICTS_KEPT:
            self._verdicts.popitem(last=False)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
